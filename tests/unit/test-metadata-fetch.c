/* SPDX-License-Identifier: Apache-2.0 */
/* The fetch API without a network: local sources through the blocking wrapper and the async call
 * (result delivered from the event loop, never from inside cn_metadata_fetch()), detection errors,
 * and options taken from a node config. HTTP sources are covered by tests/integration/test-agent.py
 * against tests/fake-cloud. */
#include <linux/capability.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fileio.h"
#include "metadata.h"
#include "node-config.h"
#include "tap.h"

static char root[] = "/tmp/cn-test-fetch-XXXXXX";

static void put_in(const char *dir, const char *path, const char *content, mode_t mode) {
        if (cn_write_file_atomic(dir, path, content, strlen(content), mode, CN_UID_INVALID, CN_GID_INVALID,
                                 CN_WRITE_MKDIR | CN_WRITE_NO_SYNC) < 0)
                abort();
}

static void put(const char *path, const char *content) {
        put_in(root, path, content, 0644);
}

/* Root reads any file: for a real EACCES the test gives up, for a while, the capabilities that
 * override file modes (their permitted bits stay, so they come back). */
static void dac_override(bool on) {
        struct __user_cap_header_struct h = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct c[2];
        unsigned bits = 1u << CAP_DAC_OVERRIDE | 1u << CAP_DAC_READ_SEARCH;

        if (syscall(SYS_capget, &h, c) < 0)
                abort();
        c[0].effective = on ? c[0].effective | (c[0].permitted & bits) : c[0].effective & ~bits;
        if (syscall(SYS_capset, &h, c) < 0)
                abort();
}

/* The proxmoxve providerID from the drive at root and the SMBIOS UUID, which a DynamicUser=
 * service gets as its credential product_uuid (LoadCredential=) because sysfs has it root-only. */
static void test_proxmoxve_credential(CnMetadataOptions *o) {
        static char creds[] = "/tmp/cn-test-creds-XXXXXX";
        static const char sysfs_uuid[] = "11111111-2222-3333-4444-555555555555";
        _cleanup_free_ char *uuid_path = NULL, *cred_path = NULL;
        int r;

        if (!mkdtemp(creds) || asprintf(&uuid_path, "%s/sys/class/dmi/id/product_uuid", root) < 0 ||
            asprintf(&cred_path, "%s/product_uuid", creds) < 0)
                abort();
        put("/run/cloudnode/cidata/meta-data", "instance-id: vm-9\nlocal-hostname: vm9\n");
        put("/sys/class/dmi/id/product_uuid", "11111111-2222-3333-4444-555555555555\n");
        put_in(creds, "product_uuid", "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE\n", 0400);

        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                _cleanup_free_ char *error = NULL;

                TAP_EQ_INT(unsetenv("CREDENTIALS_DIRECTORY"), 0, "proxmoxve: outside a service with credentials");
                TAP_EQ_INT(cn_metadata_fetch_sync(o, &m, &error), 0, "proxmoxve: no credentials: read from sysfs");
                TAP_OK(m && m->provider_id && streq(m->provider_id + STRLEN("proxmox://"), sysfs_uuid),
                       "proxmoxve: providerID of the sysfs UUID (%s)", m ? strna(m->provider_id) : "(none)");
        }
        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                _cleanup_free_ char *error = NULL;

                TAP_EQ_INT(setenv("CREDENTIALS_DIRECTORY", creds, 1), 0, "proxmoxve: a service with credentials");
                TAP_EQ_INT(cn_metadata_fetch_sync(o, &m, &error), 0, "proxmoxve: credential product_uuid read");
                TAP_EQ_STR(m ? m->provider_id : NULL, "proxmox://aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                           "proxmoxve: the credential is read first, and lower-cased");
        }
        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                _cleanup_free_ char *error = NULL;

                /* What the unit's SetCredential= gives where the host has no DMI. */
                put_in(creds, "product_uuid", "00000000-0000-0000-0000-000000000000", 0400);
                TAP_EQ_INT(cn_metadata_fetch_sync(o, &m, &error), 0, "proxmoxve: null UUID credential read");
                TAP_EQ_STR(m ? m->provider_id : NULL, NULL, "proxmoxve: the null UUID gives no providerID");
        }
        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                _cleanup_free_ char *error = NULL;

                /* The initializer's situation: sysfs unreadable, the credential there. */
                TAP_EQ_INT(chmod(uuid_path, 0), 0, "proxmoxve: sysfs product_uuid made unreadable");
                TAP_EQ_INT(unlink(cred_path), 0, "proxmoxve: credential removed");
                put_in(creds, "product_uuid", "AAAAAAAA-BBBB-CCCC-DDDD-EEEEEEEEEEEE\n", 0400);
                dac_override(false);
                r = cn_metadata_fetch_sync(o, &m, &error);
                TAP_OK(r == 0, "proxmoxve: unreadable sysfs file is not touched when the credential is there "
                       "(%d %s)", r, strna(error));
                TAP_EQ_STR(m ? m->provider_id : NULL, "proxmox://aaaaaaaa-bbbb-cccc-dddd-eeeeeeeeeeee",
                           "proxmoxve: providerID from the credential");
                dac_override(true);
        }
        {
                _cleanup_instance_metadata_ CnInstanceMetadata *m = NULL;
                _cleanup_free_ char *error = NULL;

                TAP_EQ_INT(unlink(cred_path), 0, "proxmoxve: no credential product_uuid");
                dac_override(false);
                TAP_EQ_INT(cn_metadata_fetch_sync(o, &m, &error), -EACCES,
                           "proxmoxve: unreadable sysfs UUID and no credential: -EACCES");
                dac_override(true);
                TAP_OK(!m && error && !strchr(error, '\n') && strstr(error, "/sys/class/dmi/id/product_uuid: ") &&
                               strstr(error, "Permission denied") && strstr(error, "credential product_uuid"),
                       "proxmoxve: one line naming the file and the missing credential (%s)", strna(error));
        }
        TAP_EQ_INT(unsetenv("CREDENTIALS_DIRECTORY"), 0, "proxmoxve: credentials done");
        (void) rmdir(creds);
        (void) unlink(uuid_path);
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

        test_proxmoxve_credential(&o);

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
