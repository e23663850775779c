/* SPDX-License-Identifier: Apache-2.0 */
/* Platform detection order (flag, config, kernel command line, DMI), all read under a root. */
#include <sys/stat.h>

#include "fileio.h"
#include "platform-detect.h"
#include "tap.h"

static char root[] = "/tmp/cn-test-detect-XXXXXX";

static void put(const char *path, const char *content) {
        if (cn_write_file_atomic(root, path, content, strlen(content), 0644, CN_UID_INVALID, CN_GID_INVALID,
                                 CN_WRITE_MKDIR | CN_WRITE_NO_SYNC) < 0)
                abort();
}

static void expect(const char *flag, const char *config, int want_r, const char *want, CnPlatformSource want_src,
                   const char *name) {
        const char *p = NULL;
        CnPlatformSource src = 0;
        _cleanup_free_ char *unsupported = NULL;
        int r = cn_platform_detect(root, flag, config, &p, &src, &unsupported);

        TAP_OK(r == want_r && (r < 0 || (streq(p, want) && src == want_src)), "%s (r=%d, %s)", name, r,
               r < 0 ? strna(unsupported) : p);
}

int main(void) {
        _cleanup_free_ char *id = NULL;

        if (!mkdtemp(root))
                abort();
        expect(NULL, NULL, -ENXIO, NULL, 0, "nothing to go on: -ENXIO");

        put("/sys/class/dmi/id/sys_vendor", "Amazon EC2\n");
        expect(NULL, NULL, 0, "aws", CN_PLATFORM_FROM_DMI, "DMI sys_vendor Amazon EC2");
        put("/proc/cmdline", "BOOT_IMAGE=/vmlinuz root=/dev/vda1 ignition.platform.id=gcp quiet\n");
        expect(NULL, NULL, 0, "gcp", CN_PLATFORM_FROM_CMDLINE, "kernel command line before DMI");
        expect(NULL, "hetzner", 0, "hetzner", CN_PLATFORM_FROM_CONFIG, "config before kernel command line");
        expect("azure", "hetzner", 0, "azure", CN_PLATFORM_FROM_FLAG, "flag before config");
        put("/proc/cmdline", "ignition.platform.id=qemu\n");
        expect(NULL, NULL, -EPROTONOSUPPORT, NULL, 0, "unsupported id on the command line");

        TAP_OK(cn_platform_from_cmdline("a ignition.platform.id=aws b ignition.platform.id=openstack", &id) == 0 &&
                       id && streq(id, "openstack"),
               "last ignition.platform.id= wins");
        TAP_EQ_STR(cn_platform_from_dmi(NULL, "Google Compute Engine", NULL, NULL), "gcp", "DMI: GCE product name");
        TAP_EQ_STR(cn_platform_from_dmi("Microsoft Corporation", "Virtual Machine", NULL,
                                        "7783-7084-3265-9085-8269-3286-77"),
                   "azure", "DMI: Azure asset tag");
        TAP_EQ_STR(cn_platform_from_dmi("Microsoft Corporation", "Virtual Machine", NULL, "none"), NULL,
                   "DMI: plain Hyper-V is not Azure");
        TAP_EQ_STR(cn_platform_from_dmi("OpenStack Foundation", "OpenStack Nova", NULL, NULL), "openstack",
                   "DMI: OpenStack Nova");
        TAP_EQ_STR(cn_platform_from_dmi("Hetzner", "vServer", NULL, NULL), "hetzner", "DMI: Hetzner");
        TAP_EQ_STR(cn_platform_from_dmi("DigitalOcean", "Droplet", NULL, NULL), "digitalocean", "DMI: DigitalOcean");
        TAP_EQ_STR(cn_platform_from_dmi("QEMU", "Standard PC", "SeaBIOS", NULL), NULL, "DMI: plain QEMU unknown");
        { _cleanup_free_ char *cmd = NULL; if (asprintf(&cmd, "rm -rf %s", root) > 0) (void) !system(cmd); }
        return tap_done();
}
