/* SPDX-License-Identifier: Apache-2.0 */
/* Platform detection (see platform-detect.h). */
#include "fileio.h"
#include "log.h"
#include "metadata.h"
#include "platform-detect.h"
#include "string-util.h"

static const char *const source_table[] = {
        [CN_PLATFORM_FROM_FLAG] = "flag",
        [CN_PLATFORM_FROM_CONFIG] = "config",
        [CN_PLATFORM_FROM_CMDLINE] = "kernel command line",
        [CN_PLATFORM_FROM_DMI] = "DMI",
};

const char *cn_platform_source_to_string(CnPlatformSource s) {
        return s < ELEMENTSOF(source_table) ? source_table[s] : NULL;
}

int cn_platform_from_cmdline(const char *cmdline, char **ret) {
        _cleanup_free_ char *found = NULL;
        const char *p = cmdline;

        /* Words are separated by blanks; quoting is not used for this parameter by any bootloader
         * config we know, so a quoted value is simply not a supported id. */
        while (p && *p) {
                size_t n;

                p += strspn(p, " \t\n");
                n = strcspn(p, " \t\n");
                if (n > STRLEN("ignition.platform.id=") && strneq(p, "ignition.platform.id=", STRLEN("ignition.platform.id="))) {
                        free(found);
                        found = strndup(p + STRLEN("ignition.platform.id="), n - STRLEN("ignition.platform.id="));
                        if (!found)
                                return -ENOMEM;
                }
                p += n;
        }
        *ret = TAKE_PTR(found);
        return 0;
}

static bool has_prefix_ci(const char *s, const char *prefix) {
        return s && strncasecmp(s, prefix, strlen(prefix)) == 0;
}

const char *cn_platform_from_dmi(const char *sys_vendor, const char *product_name, const char *bios_vendor,
                                 const char *chassis_asset_tag) {
        /* The strings the platforms document (and that cloud-init and systemd-detect-virt match). */
        if (has_prefix_ci(sys_vendor, "Amazon EC2") || has_prefix_ci(bios_vendor, "Amazon EC2"))
                return "aws";
        if (has_prefix_ci(product_name, "Google Compute Engine") || has_prefix_ci(sys_vendor, "Google"))
                return "gcp";
        /* Azure marks its VMs with this chassis asset tag; plain Hyper-V does not. */
        if (chassis_asset_tag && streq(chassis_asset_tag, "7783-7084-3265-9085-8269-3286-77"))
                return "azure";
        if (has_prefix_ci(sys_vendor, "DigitalOcean"))
                return "digitalocean";
        if (has_prefix_ci(sys_vendor, "Hetzner"))
                return "hetzner";
        if (has_prefix_ci(product_name, "OpenStack") || has_prefix_ci(sys_vendor, "OpenStack"))
                return "openstack";
        return NULL;
}

static const char *supported(const char *id) {
        for (const char *const *p = cn_metadata_platforms; *p; p++)
                if (streq(*p, id))
                        return *p;
        return NULL;
}

static int choose(const char *id, CnPlatformSource source, const char **ret, CnPlatformSource *ret_source,
                  char **ret_unsupported) {
        const char *s = supported(id);

        if (!s) {
                if (ret_unsupported && !(*ret_unsupported = strdup(id)))
                        return -ENOMEM;
                return -EPROTONOSUPPORT;
        }
        *ret = s;
        if (ret_source)
                *ret_source = source;
        return 0;
}

static char *read_dmi(const char *root, const char *name) {
        _cleanup_free_ char *path = NULL;
        char *data = NULL;

        if (asprintf(&path, "/sys/class/dmi/id/%s", name) < 0)
                return NULL;
        if (cn_read_file(root, path, 4096, &data, NULL) < 0)
                return NULL;
        cn_strstrip(data);
        return data;
}

int cn_platform_detect(const char *root, const char *flag, const char *config, const char **ret,
                       CnPlatformSource *ret_source, char **ret_unsupported) {
        _cleanup_free_ char *cmdline = NULL, *id = NULL, *sys_vendor = NULL, *product_name = NULL,
                            *bios_vendor = NULL, *asset_tag = NULL;
        const char *dmi;
        int r;

        if (ret_unsupported)
                *ret_unsupported = NULL;
        if (flag)
                return choose(flag, CN_PLATFORM_FROM_FLAG, ret, ret_source, ret_unsupported);
        if (config)
                return choose(config, CN_PLATFORM_FROM_CONFIG, ret, ret_source, ret_unsupported);

        r = cn_read_file(root, "/proc/cmdline", 64 * 1024, &cmdline, NULL);
        if (r < 0 && r != -ENOENT)
                log_debug_errno(r, "Failed to read /proc/cmdline, ignoring: %m");
        if (cmdline) {
                r = cn_platform_from_cmdline(cmdline, &id);
                if (r < 0)
                        return r;
                if (id)
                        return choose(id, CN_PLATFORM_FROM_CMDLINE, ret, ret_source, ret_unsupported);
        }

        sys_vendor = read_dmi(root, "sys_vendor");
        product_name = read_dmi(root, "product_name");
        bios_vendor = read_dmi(root, "bios_vendor");
        asset_tag = read_dmi(root, "chassis_asset_tag");
        dmi = cn_platform_from_dmi(sys_vendor, product_name, bios_vendor, asset_tag);
        if (dmi)
                return choose(dmi, CN_PLATFORM_FROM_DMI, ret, ret_source, ret_unsupported);
        return -ENXIO;
}
