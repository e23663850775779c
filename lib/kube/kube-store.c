/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "kube-store.h"

/* FNV-1a. */
static uint32_t key_hash(const char *key, size_t len) {
        uint32_t h = 2166136261u;

        for (size_t n = 0; n < len; n++)
                h = (h ^ (unsigned char) key[n]) * 16777619u;
        return h;
}

CnKubeStoreEntry *cn_kube_store_entry_new(const char *key, json_object *tree, const char *text, size_t len) {
        size_t key_len = strlen(key);
        CnKubeStoreEntry *e;

        if (key_len > UINT16_MAX || len > UINT32_MAX - 1)
                return NULL;
        e = malloc(offsetof(CnKubeStoreEntry, key) + key_len + 1 + (text ? len + 1 : 0));
        if (!e)
                return NULL;
        e->hash = key_hash(key, key_len);
        e->key_len = (uint16_t) key_len;
        memcpy(e->key, key, key_len + 1);
        e->tree = tree ? json_object_get(tree) : NULL;
        e->has_text = text != NULL;
        e->text_len = 0;
        if (text) {
                memcpy(e->key + key_len + 1, text, len);
                e->key[key_len + 1 + len] = 0;
                e->text_len = (uint32_t) len;
        }
        return e;
}

void cn_kube_store_entry_free(CnKubeStoreEntry *e) {
        if (!e)
                return;
        json_object_put(e->tree);
        free(e);
}

/* The slot of key, or SIZE_MAX. */
static size_t store_find(const CnKubeStore *st, const char *key) {
        size_t len = strlen(key), mask = st->n_slots - 1;
        uint32_t h;

        if (st->n == 0)
                return SIZE_MAX;
        h = key_hash(key, len);
        for (size_t s = h & mask;; s = (s + 1) & mask) {
                const CnKubeStoreEntry *e = st->slots[s];

                if (!e)
                        return SIZE_MAX;
                if (e->hash == h && e->key_len == len && memcmp(e->key, key, len) == 0)
                        return s;
        }
}

CnKubeStoreEntry *cn_kube_store_get(const CnKubeStore *st, const char *key) {
        size_t s = store_find(st, key);

        return s == SIZE_MAX ? NULL : st->slots[s];
}

static void store_place(CnKubeStore *st, CnKubeStoreEntry *e) {
        size_t mask = st->n_slots - 1, s;

        for (s = e->hash & mask; st->slots[s]; s = (s + 1) & mask)
                ;
        st->slots[s] = e;
        st->n++;
}

int cn_kube_store_put(CnKubeStore *st, CnKubeStoreEntry *e, CnKubeStoreEntry **ret_old) {
        size_t s = store_find(st, e->key);

        if (s != SIZE_MAX) {
                *ret_old = st->slots[s];
                st->slots[s] = e;
                return 0;
        }
        *ret_old = NULL;
        if ((st->n + 1) * 4 > st->n_slots * 3) {
                CnKubeStore grown = { .n_slots = st->n_slots ? st->n_slots * 2 : 16 };

                grown.slots = calloc(grown.n_slots, sizeof(CnKubeStoreEntry *));
                if (!grown.slots)
                        return -ENOMEM;
                for (size_t k = 0; k < st->n_slots; k++)
                        if (st->slots[k])
                                store_place(&grown, st->slots[k]);
                free(st->slots);
                *st = grown;
        }
        store_place(st, e);
        return 0;
}

CnKubeStoreEntry *cn_kube_store_take(CnKubeStore *st, const char *key) {
        size_t hole = store_find(st, key), mask = st->n_slots - 1;
        CnKubeStoreEntry *e;

        if (hole == SIZE_MAX)
                return NULL;
        e = st->slots[hole];
        for (size_t s = (hole + 1) & mask; st->slots[s]; s = (s + 1) & mask) {
                size_t home = st->slots[s]->hash & mask;

                /* This entry may fill the hole when the hole lies between its home slot and it:
                 * a lookup starting at its home passes the hole first. */
                if (((s - home) & mask) >= ((s - hole) & mask)) {
                        st->slots[hole] = st->slots[s];
                        st->slots[s] = NULL;
                        hole = s;
                }
        }
        st->slots[hole] = NULL;
        st->n--;
        return e;
}

void cn_kube_store_clear(CnKubeStore *st, void (*free_entry)(CnKubeStoreEntry *e, void *userdata), void *userdata) {
        for (size_t k = 0; k < st->n_slots; k++)
                if (st->slots[k]) {
                        if (free_entry)
                                free_entry(st->slots[k], userdata);
                        else
                                cn_kube_store_entry_free(st->slots[k]);
                }
        free(st->slots);
        *st = (CnKubeStore){};
}
