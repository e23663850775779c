/* SPDX-License-Identifier: Apache-2.0 */
/* Private to lib/provider: DigitalOcean (provider-digitalocean.c). The parser is exposed for the
 * unit tests. */
#pragma once

#include "provider-internal.h"

/* A droplet object of API v2 ({"id", "name", "status", "size_slug", "region", "networks"}). */
int cn_provider_digitalocean_parse_droplet(json_object *droplet, CnProviderInstance **ret);
