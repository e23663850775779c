/* SPDX-License-Identifier: Apache-2.0 */
/* The fetch API without a network: local sources through the blocking wrapper and the async call
 * (result delivered from the event loop, never from inside cn_metadata_fetch()), detection errors,
 * and options taken from a node config. HTTP sources are covered by tests/integration/test-agent.py
 * against tests/fake-cloud. */
#include "fileio.h"
#include "metadata.h"
#include "node-config.h"
#include "tap.h"

static char root[] = "/tmp/cn-test-fetch-XXXXXX";

static void put(const char *path, const char *content) {
        if (cn_write_file_atomic(root, path, content, strlen(content), 0644, CN_UID_INVALID, CN_GID_INVALID,
                                 CN_WRITE_MKDIR | CN_WRITE_NO_SYNC) < 0)
                abort();
}

static int calls;
static void on_done(int r, CnInstanceMetadata *m, void *userdata) {
        int *result = userdata;

        calls++;
        *result = r;
        cn_instance_metadata_free(m);
}

int main(void) {
        CnMetadataOptions o = CN_METADATA_OPTIONS_INIT;
        _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL, *m2 = NULL;
        _cleanup_free_ char *error = NULL, *error2 = NULL;
        _cleanup_node_config_ CnNodeConfig *cfg = NULL;
        _cleanup_json_ json_object *doc = NULL;
        sd_event *e = NULL;
        CnMetadataFetch *f = NULL;
        int result = 1, r;

        if (!mkdtemp(root))
                abort();
        o.root = root;

        TAP_EQ_INT(cn_metadata_fetch_sync(&o, &m, NULL), -ENXIO, "no platform detectable: -ENXIO");

        put("/etc/cloudnode/metadata.yaml", "instanceID: bm-1\nhostname: bm-1.example.net\nipv4Private: 10.1.2.3\n");
        o.platform = "file";
        TAP_EQ_INT(cn_metadata_fetch_sync(&o, &m, NULL), 0, "file platform through the blocking wrapper");
        TAP_EQ_STR(m ? m->instance_id : NULL, "bm-1", "file: instance id");
        TAP_EQ_STR(m && m->ipv4_private ? m->ipv4_private[0] : NULL, "10.1.2.3", "file: a single address string");

        put("/etc/cloudnode/metadata.yaml", "instanceID: bm-1\nbogus: 1\n");
        TAP_EQ_INT(cn_metadata_fetch_sync(&o, &m2, &error), -EBADMSG, "file: unknown key rejected");
        TAP_OK(error && strstr(error, "bogus"), "file: the error names the key (%s)", strna(error));

        o.platform = "proxmoxve";
        TAP_OK(cn_metadata_fetch_sync(&o, &m2, &error2) < 0 && !m2, "proxmoxve without a drive fails");
        TAP_OK(error2 && strstr(error2, "/run/cloudnode/cidata"), "proxmoxve: error names the drive (%s)",
               strna(error2));

        /* Async: the callback runs from the loop, not from inside the call. */
        put("/run/cloudnode/cidata/meta-data", "instance-id: vm-9\nlocal-hostname: vm9\n");
        if (sd_event_new(&e) < 0)
                abort();
        r = cn_metadata_fetch(e, NULL, &o, on_done, &result, &f);
        TAP_OK(r == 0 && calls == 0, "async local fetch: no callback inside cn_metadata_fetch()");
        (void) sd_event_run(e, 1000000);
        TAP_OK(calls == 1 && result == 0, "async local fetch: one callback from the loop");
        f = cn_metadata_fetch_free(f);

        /* Freed before the loop runs: cancelled, no callback. */
        calls = 0;
        r = cn_metadata_fetch(e, NULL, &o, on_done, &result, &f);
        f = cn_metadata_fetch_free(f);
        (void) sd_event_run(e, 100000);
        TAP_OK(r == 0 && calls == 0, "a freed fetch never calls back");
        sd_event_unref(e);

        doc = json_tokener_parse("{\"platform\":\"openstack\",\"metadata\":{\"endpoint\":\"http://x\","
                                 "\"configDrive\":\"/cd\",\"timeout\":\"3s\",\"retries\":0,\"requireIMDSv2\":true}}");
        TAP_EQ_INT(cn_node_config_from_json(doc, &cfg, NULL), 0, "node config");
        cn_metadata_options_from_node_config(&o, cfg, "/r");
        TAP_OK(streq(o.platform, "openstack") && streq(o.endpoint, "http://x") && streq(o.config_drive, "/cd") &&
                       o.timeout_usec == 3000000 && o.retries == 0 && o.aws_require_imdsv2 && streq(o.root, "/r"),
               "options from the node config");
        {
                _cleanup_free_ char *cmd = NULL;
                if (asprintf(&cmd, "rm -rf '%s'", root) > 0)
                        (void) !system(cmd);
        }
        return tap_done();
}
