/* SPDX-License-Identifier: Apache-2.0 */
/* The JSON filter's scans on one Node document (a file, as bench-json-filter.py writes it from
 * tests/pylib/nodegen.py): the initializer's filter and the boundary scan of a List item, each
 * run 5000 times per round, the best of 15 rounds reported per Node, with the scans of 64-byte
 * blocks (where the CPU has AVX2) and with the portable ones. A benchmark, not a test. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "initializer-node-filter.h"
#include "json-filter.h"

#define ROUNDS 15
#define PER_ROUND 5000

static double now(void) {
        struct timespec t;

        (void) clock_gettime(CLOCK_MONOTONIC, &t);
        return (double) t.tv_sec + (double) t.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
        static char doc[4 << 20];
        size_t n;
        FILE *f;

        if (argc != 2) {
                fprintf(stderr, "Usage: %s NODE.json\n", argv[0]);
                return 2;
        }
        f = fopen(argv[1], "re");
        if (!f) {
                perror(argv[1]);
                return 1;
        }
        n = fread(doc, 1, sizeof(doc), f);
        fclose(f);
        printf("Node: %zu bytes of JSON\n", n);
        printf("%-28s %14s %10s %18s %10s\n", "scans", "filter us/Node", "MB/s", "boundary us/Node", "MB/s");
        for (int portable = 0; portable < 2; portable++) {
                double best_filter = 1e9, best_scan = 1e9;
                size_t kept = 0;

                cn_json_filter_set_portable(portable);
                for (int round = 0; round < ROUNDS; round++) {
                        double t0 = now(), t1, t2;

                        for (int i = 0; i < PER_ROUND; i++) {
                                char *out;

                                if (cn_json_filter_text(doc, n, initializer_node_filter, &out, &kept) < 0) {
                                        fprintf(stderr, "%s: not a JSON document the filter takes\n", argv[1]);
                                        return 1;
                                }
                                free(out);
                        }
                        t1 = now();
                        for (int i = 0; i < PER_ROUND; i++) {
                                CnJsonValueScan s = {};
                                bool done = false;

                                if (cn_json_value_scan(&s, doc, n, &done) != n || !done) {
                                        fprintf(stderr, "%s: the value does not end at the last byte\n", argv[1]);
                                        return 1;
                                }
                        }
                        t2 = now();
                        if (t1 - t0 < best_filter)
                                best_filter = t1 - t0;
                        if (t2 - t1 < best_scan)
                                best_scan = t2 - t1;
                }
                best_filter /= PER_ROUND;
                best_scan /= PER_ROUND;
                printf("%-28s %14.2f %10.0f %18.2f %10.0f\n",
                       portable ? "portable" : "64-byte blocks (AVX2)", best_filter * 1e6, (double) n / best_filter / 1e6,
                       best_scan * 1e6, (double) n / best_scan / 1e6);
                if (portable)
                        printf("(%zu bytes kept by the filter)\n", kept);
        }
        return 0;
}
