/*
 * proof.h — proven mode of the sender's connection (contract/stacklens_wire.def,
 * "connection start"): the hello that proves who sends, and the checks that
 * prove the collector is the real one, so a squatter on the collector's port
 * or socket path gets no frame.
 *
 * On the collector's Unix socket the kernel vouches for both ends
 * (SO_PEERCRED): the collector reads our uid, we check its uid against the
 * collector user before writing anything. Over TCP we present a MUNGE
 * credential whose payload is a fresh random nonce, and accept the
 * collector only if it answers with a credential for the same nonce issued
 * to the collector user. libmunge is loaded with dlopen on first use: a node
 * without it still runs the job (one warning, frames spooled).
 *
 * Everything here runs on the sender thread only, and blocks at most until
 * the deadline it is given.
 */
#ifndef SL_PROOF_H
#define SL_PROOF_H

#include <stddef.h>
#include <stdint.h>

#include "config.h"

/*
 * Proves the connection fd (connected, non-blocking; unix = 1 on the Unix
 * socket) before any frame is written: checks the peer (Unix socket), sends
 * the hello, reads and checks the welcome. Returns 0 when frames may follow;
 * else -1 with the reason in why[why_size].
 */
int sl_proof_connect(const sl_config *cfg, int fd, int unix_socket, uint64_t deadline_ns,
                     char *why, size_t why_size);

#endif /* SL_PROOF_H */
