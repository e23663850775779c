/* SPDX-License-Identifier: Apache-2.0 */
/* The informer's cache table: every key put is found with its value until it is replaced or
 * taken, through growth and through deletions that move the entries after them back (checked
 * against a plain array over thousands of random operations on keys that share home slots);
 * entries keep their key, tree and text; clearing hands each entry over once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kube-store.h"
#include "macro.h"
#include "tap.h"

#define N_KEYS 600

static void test_entry(void) {
        _cleanup_json_ json_object *tree = json_object_new_object();
        CnKubeStoreEntry *e = cn_kube_store_entry_new("ns/a", NULL, "te\0xt", 5), *t;
        char long_key[70000];

        TAP_OK(e && streq(e->key, "ns/a") && e->key_len == 4 && e->has_text && e->text_len == 5 &&
                       memcmp(cn_kube_store_entry_text(e), "te\0xt", 6) == 0 && !e->tree,
               "an entry keeps its key and its text (NUL bytes included, NUL-terminated)");
        cn_kube_store_entry_free(e);
        e = cn_kube_store_entry_new("b", tree, NULL, 0);
        TAP_OK(e && e->tree == tree && json_object_put(json_object_get(tree)) == 0 && !e->has_text,
               "an entry holds a reference to its tree and no text");
        t = cn_kube_store_entry_new("c", NULL, "", 0);
        TAP_OK(t && t->has_text && t->text_len == 0, "an empty text is a text");
        cn_kube_store_entry_free(t);
        cn_kube_store_entry_free(e);
        memset(long_key, 'k', sizeof(long_key) - 1);
        long_key[sizeof(long_key) - 1] = 0;
        TAP_OK(!cn_kube_store_entry_new(long_key, NULL, "x", 1), "a key over 65535 bytes is refused");
}

typedef struct Ref {
        char key[16];
        CnKubeStoreEntry *e; /* the entry expected in the store, or NULL */
} Ref;

static void count_free(CnKubeStoreEntry *e, void *userdata) {
        (*(unsigned *) userdata)++;
        cn_kube_store_entry_free(e);
}

static bool store_matches(const CnKubeStore *st, const Ref *ref, size_t n_ref) {
        size_t n = 0, seen = 0;
        CnKubeStoreEntry *e;

        for (size_t k = 0; k < n_ref; k++) {
                if (cn_kube_store_get(st, ref[k].key) != ref[k].e)
                        return false;
                n += ref[k].e != NULL;
        }
        CN_KUBE_STORE_FOREACH(e, st)
                seen++;
        return n == st->n && seen == n && st->n * 4 <= st->n_slots * 3;
}

static void test_random(void) {
        static Ref ref[N_KEYS];
        CnKubeStore st = {};
        unsigned seed = 12345, freed = 0, puts = 0, takes = 0, replaced = 0;
        bool ok = true, wrapped = false;
        size_t max_n = 0;

        for (size_t k = 0; k < N_KEYS; k++)
                snprintf(ref[k].key, sizeof(ref[k].key), "node-%zu", k);
        TAP_OK(!cn_kube_store_get(&st, "node-0") && !cn_kube_store_take(&st, "node-0") && st.n == 0,
               "an empty store finds nothing");

        for (unsigned round = 0; round < 40000 && ok; round++) {
                Ref *r = &ref[rand_r(&seed) % N_KEYS];
                unsigned op = rand_r(&seed) % 100;

                /* Mostly puts while it fills, then as many takes as puts. */
                if (op < (round < 4000 ? 80u : 50u)) {
                        char text[32];
                        CnKubeStoreEntry *e, *old = (CnKubeStoreEntry *) 1;

                        snprintf(text, sizeof(text), "%s@%u", r->key, round);
                        e = cn_kube_store_entry_new(r->key, NULL, text, strlen(text));
                        ok = e && cn_kube_store_put(&st, e, &old) == 0 && old == r->e;
                        replaced += old != NULL;
                        cn_kube_store_entry_free(old);
                        r->e = e;
                        puts++;
                } else {
                        CnKubeStoreEntry *e = cn_kube_store_take(&st, r->key);

                        ok = e == r->e;
                        cn_kube_store_entry_free(e);
                        r->e = NULL;
                        takes++;
                }
                max_n = st.n > max_n ? st.n : max_n;
                /* An entry that sits before its home slot (its probe run wrapped around the end). */
                for (size_t s = 0; !wrapped && s < st.n_slots; s++)
                        wrapped = st.slots[s] && (st.slots[s]->hash & (st.n_slots - 1)) > s;
                if (ok && round % 97 == 0)
                        ok = store_matches(&st, ref, N_KEYS);
        }
        TAP_OK(ok && store_matches(&st, ref, N_KEYS),
               "%u puts (%u replacing) and %u takes agree with a plain array, up to %zu entries", puts, replaced,
               takes, max_n);
        TAP_OK(wrapped, "some probe runs wrapped around the table's end");
        for (size_t k = 0; k < N_KEYS && ok; k++)
                if (ref[k].e) {
                        const char *text = cn_kube_store_entry_text(ref[k].e);
                        size_t len = strlen(ref[k].key);

                        ok = strncmp(text, ref[k].key, len) == 0 && text[len] == '@';
                }
        TAP_OK(ok, "each key's entry holds its own text");
        {
                size_t n = st.n;

                cn_kube_store_clear(&st, count_free, &freed);
                TAP_OK(freed == n && st.n == 0 && !st.slots && !cn_kube_store_get(&st, "node-1"),
                       "clearing hands each of the %zu entries over once and leaves an empty store", n);
        }
}

/* Keys whose hashes share the low bits crowd one run of slots; taking from its middle keeps the
 * rest reachable. */
static void test_crowded(void) {
        CnKubeStore st = {};
        char keys[64][16];
        bool ok = true;
        unsigned n = 0;

        for (unsigned k = 0; n < 12 && k < 100000; k++) {
                CnKubeStoreEntry *e, *old;

                snprintf(keys[n], sizeof(keys[n]), "k%u", k);
                e = cn_kube_store_entry_new(keys[n], NULL, "v", 1);
                assert(e);
                /* Only keys whose home is slot 10 of a table of 16 (it stays 16 up to 12 entries): the
                 * run wraps around the end. */
                if ((e->hash & 15) != 10) {
                        cn_kube_store_entry_free(e);
                        continue;
                }
                ok = ok && cn_kube_store_put(&st, e, &old) == 0 && !old;
                n++;
        }
        TAP_OK(ok && n == 12 && st.n_slots == 16, "12 keys of one home slot fill a run of a 16-slot table");
        for (unsigned k = 1; k < n; k += 3)
                cn_kube_store_entry_free(cn_kube_store_take(&st, keys[k]));
        for (unsigned k = 0; k < n; k++)
                ok = ok && (cn_kube_store_get(&st, keys[k]) != NULL) == (k % 3 != 1);
        TAP_OK(ok && st.n == 8, "taking every third key of the run keeps the others found");
        cn_kube_store_clear(&st, NULL, NULL);
}

int main(void) {
        test_entry();
        test_random();
        test_crowded();
        return tap_done();
}
