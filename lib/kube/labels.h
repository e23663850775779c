/* SPDX-License-Identifier: Apache-2.0 */
/* Kubernetes label syntax (apimachinery validation.IsQualifiedName / IsValidLabelValue) and the
 * rules for labels a cloud provider may add to a Node: never in the kubernetes.io or k8s.io
 * namespaces (those belong to Kubernetes and to the well-known labels we set ourselves), and never
 * overwriting a value someone else already put there. */
#pragma once

#include "macro.h"

/* "[prefix/]name": prefix a DNS-1123 subdomain of at most 253 characters, name at most 63
 * characters of [A-Za-z0-9_.-] starting and ending alphanumeric. */
bool cn_label_key_is_valid(const char *key);
/* Empty, or at most 63 characters of [A-Za-z0-9_.-] starting and ending alphanumeric. */
bool cn_label_value_is_valid(const char *value);
/* A Node name: a DNS-1123 subdomain (lower case) of at most 253 characters. */
bool cn_node_name_is_valid(const char *name);
/* True when the key's prefix is kubernetes.io, k8s.io, or a subdomain of either. */
bool cn_label_key_is_reserved(const char *key);

/* Splits "key=value" into its parts after validating both. Returns -EINVAL for bad syntax. */
int cn_label_parse(const char *kv, char **ret_key, char **ret_value);

/* Adds the provider's extra labels ("key=value" strv) to the JSON object `out` (key -> value),
 * skipping reserved keys, invalid ones, and keys that `existing` (the Node's current labels, may
 * be NULL) already carries. Returns the number of labels added, or -ENOMEM. */
int cn_labels_add_extra(json_object *out, json_object *existing, char *const *extra);
