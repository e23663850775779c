/* SPDX-License-Identifier: Apache-2.0 */
/* `cloudnode-controller deckhouse-hook NAME`: the hooks of the Deckhouse module
 * cloud-provider-cloudnode (deckhouse/modules/030-cloud-provider-cloudnode/hooks), speaking the
 * shell-operator / addon-operator protocol. See deckhouse-hooks.c. */
#pragma once

/* argv[0] is the hook's name; "--config" prints its bindings; "--module-dir DIR" says where the
 * module is (ensure-crds reads DIR/crds). Returns the process exit status. */
int cn_deckhouse_hook_main(int argc, char *argv[]);
