/* SPDX-License-Identifier: Apache-2.0 */
/* The informer's cache: objects by key ("namespace/name" or "name") in an open-addressing hash
 * table (linear probing; a deletion moves the entries after the hole back, so there are no
 * tombstones), each entry one allocation holding its key and its value, a json-c tree or an
 * object's text (cn_kube_text_encode()). Per object that is an 8-byte slot at no more than 3/4
 * load and one allocation, where a json-c object's table took a 40-byte slot at 2/3 load, the
 * key allocated apart, and a json-c string 48 bytes of header for the text. */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <json-c/json.h>

typedef struct CnKubeStoreEntry {
        uint32_t hash;
        uint32_t text_len;  /* the text's length (it follows the key's NUL); 0 without text */
        json_object *tree;  /* the tree kept, or NULL */
        uint16_t key_len;
        bool has_text;
        char key[];         /* NUL-terminated; the text follows, NUL-terminated */
} CnKubeStoreEntry;

typedef struct CnKubeStore {
        CnKubeStoreEntry **slots; /* n_slots, a power of two, or NULL while empty */
        size_t n_slots, n;
} CnKubeStore;

/* An entry for key holding tree (a new reference is taken) if not NULL, and a copy of
 * text[0..len) if text is not NULL. NULL when out of memory or for a key longer than 65535. */
CnKubeStoreEntry *cn_kube_store_entry_new(const char *key, json_object *tree, const char *text, size_t len);
/* Drops the tree's reference and frees the entry. */
void cn_kube_store_entry_free(CnKubeStoreEntry *e);

/* The text of an entry made with one (has_text). */
static inline const char *cn_kube_store_entry_text(const CnKubeStoreEntry *e) {
        return e->key + e->key_len + 1;
}

CnKubeStoreEntry *cn_kube_store_get(const CnKubeStore *st, const char *key);
/* Puts e in the place of the entry with its key, which is returned in *ret_old (NULL when there
 * was none); -ENOMEM when the table cannot grow, and then e is not taken. */
int cn_kube_store_put(CnKubeStore *st, CnKubeStoreEntry *e, CnKubeStoreEntry **ret_old);
/* Takes the entry of key out of the table and returns it (NULL when there is none). */
CnKubeStoreEntry *cn_kube_store_take(CnKubeStore *st, const char *key);
/* Empties the table, passing each entry to free_entry (cn_kube_store_entry_free() when NULL). */
void cn_kube_store_clear(CnKubeStore *st, void (*free_entry)(CnKubeStoreEntry *e, void *userdata), void *userdata);

/* Each entry, as e (declared by the caller), in table order; break leaves the loop. The store
 * must not change meanwhile. */
#define CN_KUBE_STORE_FOREACH(e, st)                        \
        for (size_t _s = 0; _s < (st)->n_slots; _s++)       \
                if (!((e) = (st)->slots[_s])) {             \
                } else
