/* SPDX-License-Identifier: Apache-2.0 */
/* cloudnode-initializer: the cloud-node-lifecycle controller of cluster mode
 * (initializer-lifecycle.c): Nodes that are not Ready are checked against the cloud. */
#pragma once

typedef struct Manager Manager;

int lifecycle_start(Manager *m);
void lifecycle_stop(Manager *m);
