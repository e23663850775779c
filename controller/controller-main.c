/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-controller: entry point. */
#include <getopt.h>

#include "log.h"

static int help(void) {
        printf("Usage: cloudnode-controller [OPTIONS]\n\n"
               "  -h --help        Show this help\n"
               "     --version     Show the version\n"
               "  -v N             Verbosity (klog-style; 4 and above is debug)\n");
        return 0;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, 'V' },
                {},
        };
        int c;

        cn_log_open("cloudnode-controller", CN_LOG_TARGET_AUTO);
        while ((c = getopt_long(argc, argv, "hv:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        return help();
                case 'V':
                        printf("cloudnode-controller %s\n", PACKAGE_VERSION);
                        return 0;
                case 'v':
                        cn_log_set_verbosity(atoi(optarg));
                        break;
                default:
                        return 2;
                }
        return 0;
}
