/*
 * libslfabric: the small C helper the stacklens fabric sampler calls through ctypes.
 *
 * It wraps the InfiniBand management libraries (libibnetdisc, libibmad) behind a flat
 * API of plain integers and buffers:
 *   - slf_discover(): fabric discovery (nodes, ports, links) plus every switch's linear
 *     forwarding table and the subnet's identity (the local port's GID prefix and SM LID),
 *     serialised as tab-separated text lines (parsed by collector/fabric/mad.py);
 *   - slf_cpi(): the PMA ClassPortInfo capability mask of each node (extended counters?);
 *   - slf_sweep(): PortCountersExtended (64-bit data/packets) and PortCounters (errors,
 *     PortXmitWait, and the 32-bit data counters when extended ones are unsupported) of a
 *     list of (LID, port) targets, and in the same pass the PortInfo state of a list of
 *     probed switch ports (the ends of links known to be down: is the cable back?). Raw
 *     values only: words stay words, the Python side converts once at parse time.
 *     Counters are only read, never reset.
 * One slf handle owns one MAD port; slf_sweep keeps a window of queries in flight on it
 * (answers matched by transaction id), and sweeps run in parallel by giving slices of the
 * target list to several worker processes, each with its own handle (umad2sim serves one
 * working MAD port per process).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <infiniband/ibnetdisc.h>
#include <infiniband/mad.h>
#include <infiniband/umad.h>

/* PMA ClassPortInfo capability bits (IBA 16.1.2, PortCountersExtended support). */
#define SLF_PM_EXT_WIDTH_SUPPORTED 0x0200
#define SLF_PM_EXT_WIDTH_NOIETF_SUP 0x0400

/*
 * Layout of one target's output row in slf_sweep: column SLF_<name> holds the counter
 * <name> of contract/port_counters.def (stacklens.constants.PORT_COUNTERS, data in words).
 * collector/fabric/mad.py checks its mirror against slf_abi() and slf_counter_name().
 */
#define SL_PORT_COUNTER(name, ...) SLF_##name,
enum {
#include "port_counters.def"
	SLF_NUM_COUNTERS
};
#undef SL_PORT_COUNTER

/* The libibmad field of each column in PortCounters and in PortCountersExtended
 * (IB_NO_FIELD: the counter has no extended form). */
#define SL_PORT_COUNTER(name, kind, basic_bits, ext_bits, scale, mad, mad_ext, ...) mad,
static const enum MAD_FIELDS basic_field[] = {
#include "port_counters.def"
};
#undef SL_PORT_COUNTER
#define SL_PORT_COUNTER(name, kind, basic_bits, ext_bits, scale, mad, mad_ext, ...) mad_ext,
static const enum MAD_FIELDS extended_field[] = {
#include "port_counters.def"
};
#undef SL_PORT_COUNTER

/* Status bits of one target in slf_sweep. */
#define SLF_OK_EXTENDED 0x1 /* PortCountersExtended answered: data/packets are 64-bit */
#define SLF_OK_BASIC 0x2    /* PortCounters answered: errors and PortXmitWait are valid */

/* What the ctypes mirror must agree on: counters per row, bytes per value, status bits. */
void slf_abi(uint32_t out[4])
{
	out[0] = SLF_NUM_COUNTERS;
	out[1] = sizeof(uint64_t);
	out[2] = SLF_OK_EXTENDED;
	out[3] = SLF_OK_BASIC;
}

/* The Python name of row column i, NULL past the last. */
const char *slf_counter_name(int i)
{
#define SL_PORT_COUNTER(name, ...) #name,
	static const char *const names[] = {
#include "port_counters.def"
	};
#undef SL_PORT_COUNTER
#undef SLF_NAME
	return i >= 0 && i < SLF_NUM_COUNTERS ? names[i] : NULL;
}

struct slf {
	struct ibmad_port *port;
	int timeout_ms;
	int retries;
};

/* Open a MAD port on CA `ca` (NULL = first) port `ca_port` (0 = first active). */
struct slf *slf_open(const char *ca, int ca_port, int timeout_ms, int retries)
{
	int classes[] = {IB_SMI_CLASS, IB_SMI_DIRECT_CLASS, IB_PERFORMANCE_CLASS};
	struct slf *h = calloc(1, sizeof(*h));

	if (!h)
		return NULL;
	h->port = mad_rpc_open_port((char *)ca, ca_port, classes, 3);
	if (!h->port) {
		free(h);
		return NULL;
	}
	h->timeout_ms = timeout_ms;
	h->retries = retries;
	mad_rpc_set_timeout(h->port, timeout_ms);
	mad_rpc_set_retries(h->port, retries);
	return h;
}

/* Close a handle from slf_open. */
void slf_close(struct slf *h)
{
	if (!h)
		return;
	mad_rpc_close_port(h->port);
	free(h);
}

/* Free a buffer returned by slf_discover. */
void slf_free(char *buf)
{
	free(buf);
}

/* Copy a node description with tabs and newlines replaced (it is a text field). */
static void clean_desc(const char *in, char *out, size_t size)
{
	size_t i;

	for (i = 0; i + 1 < size && in[i]; i++)
		out[i] = (in[i] == '\t' || in[i] == '\n' || in[i] == '\r') ? ' ' : in[i];
	out[i] = '\0';
}

struct emit_ctx {
	FILE *out;
	struct slf *h;
	int lft_errors;
};

/* Write one switch's linear forwarding table: `F guid lid top p0,p1,...,ptop`. */
static void emit_lft(struct emit_ctx *ctx, ibnd_node_t *node)
{
	uint8_t block[IB_SMP_DATA_SIZE];
	unsigned top = mad_get_field(node->switchinfo, 0, IB_SW_LINEAR_FDB_TOP_F);
	ib_portid_t dest = {0};
	unsigned b, i;

	if (!ctx->h || top == 0 || top >= 0xc000 || !node->ports || !node->ports[0])
		return;
	dest.lid = node->ports[0]->base_lid;
	fprintf(ctx->out, "F\t%016" PRIx64 "\t%u", node->guid, top);
	for (b = 0; b <= top / 64; b++) {
		if (!smp_query_via(block, &dest, IB_ATTR_LINEARFORWTBL, b, ctx->h->timeout_ms,
				   ctx->h->port)) {
			ctx->lft_errors++;
			memset(block, 0xff, sizeof(block));
		}
		for (i = 0; i < 64 && b * 64 + i <= top; i++)
			fprintf(ctx->out, "%c%u", b == 0 && i == 0 ? '\t' : ',', block[i]);
	}
	fputc('\n', ctx->out);
}

/* Write one node, its ports (with their remote ends) and, for switches, its LFT. */
static void emit_node(ibnd_node_t *node, void *user)
{
	struct emit_ctx *ctx = user;
	char desc[IB_SMP_DATA_SIZE + 1];
	int p;

	clean_desc(node->nodedesc, desc, sizeof(desc));
	fprintf(ctx->out, "N\t%d\t%016" PRIx64 "\t%d\t%s\n", node->type, node->guid,
		node->numports, desc);
	for (p = 0; p <= node->numports; p++) {
		ibnd_port_t *port = node->ports ? node->ports[p] : NULL;

		if (!port)
			continue;
		/*
		 * The speed the port runs: LinkSpeedExtActive (FDR/EDR/HDR/NDR) whatever the
		 * port's CapabilityMask says (a switch's external ports report a mask of 0, only
		 * port 0 carries it; a port without extended speeds reads 0 there), and the
		 * vendor ExtendedPortInfo's LinkSpeedActive (FDR10), which libibnetdisc reads
		 * for devices that have it (zeroes otherwise).
		 */
		fprintf(ctx->out,
			"P\t%016" PRIx64 "\t%d\t%016" PRIx64 "\t%u\t%u\t%u\t%u\t%u\t%u\t%u",
			node->guid, p, port->guid, port->base_lid,
			mad_get_field(port->info, 0, IB_PORT_STATE_F),
			mad_get_field(port->info, 0, IB_PORT_PHYS_STATE_F),
			mad_get_field(port->info, 0, IB_PORT_LINK_WIDTH_ACTIVE_F),
			mad_get_field(port->info, 0, IB_PORT_LINK_SPEED_ACTIVE_F),
			mad_get_field(port->info, 0, IB_PORT_LINK_SPEED_EXT_ACTIVE_F),
			mad_get_field(port->ext_info, 0, IB_MLNX_EXT_PORT_LINK_SPEED_ACTIVE_F));
		if (port->remoteport && port->remoteport->node)
			fprintf(ctx->out, "\t%016" PRIx64 "\t%d\n", port->remoteport->node->guid,
				port->remoteport->portnum);
		else
			fprintf(ctx->out, "\t0\t0\n");
	}
	if (node->type == IB_NODE_SWITCH)
		emit_lft(ctx, node);
}

/* Write the subnet's identity as the local port sees it: `S gid_prefix sm_lid`. */
static void emit_subnet(FILE *out, ibnd_fabric_t *fabric)
{
	ibnd_node_t *node = fabric->from_node;
	ibnd_port_t *port = NULL;
	int p;

	if (!node || !node->ports)
		return;
	port = node->ports[fabric->from_portnum];
	for (p = 0; !port && p <= node->numports; p++)
		port = node->ports[p];
	if (!port)
		return;
	fprintf(out, "S\t%016" PRIx64 "\t%u\n", mad_get_field64(port->info, 0, IB_PORT_GID_PREFIX_F),
		mad_get_field(port->info, 0, IB_PORT_SMLID_F));
}

/*
 * Discover the fabric from CA `ca` port `ca_port`, then read the forwarding tables through
 * a MAD port opened after discovery (umad2sim serves one open port per process: no other
 * slf handle may be open during this call). On success *out is a malloc'd text (free with
 * slf_free) and the return value is the number of LFT blocks that could not be read;
 * a negative errno on failure.
 */
int slf_discover(const char *ca, int ca_port, int timeout_ms, int with_lfts, char **out)
{
	/* rdma-core 44 dereferences the config: never pass NULL. */
	struct ibnd_config config;
	struct emit_ctx ctx = {0};
	ibnd_fabric_t *fabric;
	size_t len = 0;

	memset(&config, 0, sizeof(config));
	config.timeout_ms = timeout_ms;
	config.flags = IBND_CONFIG_MLX_EPI; /* read ExtendedPortInfo (FDR10) where it exists */
	*out = NULL;
	fabric = ibnd_discover_fabric((char *)ca, ca_port, NULL, &config);
	if (!fabric)
		return -EIO;
	if (with_lfts)
		ctx.h = slf_open(ca, ca_port, timeout_ms, 2);
	ctx.out = open_memstream(out, &len);
	if (!ctx.out) {
		slf_close(ctx.h);
		ibnd_destroy_fabric(fabric);
		return -ENOMEM;
	}
	ibnd_iter_nodes(fabric, emit_node, &ctx);
	emit_subnet(ctx.out, fabric);
	fclose(ctx.out);
	slf_close(ctx.h);
	ibnd_destroy_fabric(fabric);
	if (with_lfts && !ctx.h)
		return -ENODEV;
	return ctx.lft_errors;
}

/* PMA ClassPortInfo capability mask of each LID in `lids` (0 where the query failed). */
int slf_cpi(struct slf *h, int n, const uint16_t *lids, uint32_t *capmask)
{
	uint8_t buf[1024];
	int i, ok = 0;

	for (i = 0; i < n; i++) {
		ib_portid_t dest = {0};

		dest.lid = lids[i];
		dest.qp = 1;
		dest.qkey = IB_DEFAULT_QP1_QKEY;
		memset(buf, 0, sizeof(buf));
		capmask[i] = 0;
		if (pma_query_via(buf, &dest, 0, h->timeout_ms, CLASS_PORT_INFO, h->port)) {
			/* CapabilityMask is the 16-bit field at byte 2 of ClassPortInfo. */
			capmask[i] = ((uint32_t)buf[2] << 8) | buf[3];
			ok++;
		}
	}
	return ok;
}

/* MADs one handle keeps in flight during slf_sweep (answers are matched by transaction id). */
#define SLF_WINDOW 32

/* One query of a sweep: target (or probe) index, class and attribute, attempt, when it was
 * (re)sent. */
struct slf_query {
	int target;
	uint8_t mgtclass; /* IB_PERFORMANCE_CLASS (counters) or IB_SMI_CLASS (a probe's PortInfo) */
	uint16_t attr;
	uint8_t attempt;
	uint8_t state; /* SLF_Q_WAITING, SLF_Q_SENT, SLF_Q_DONE */
	double sent_ms;
};

enum { SLF_Q_WAITING, SLF_Q_SENT, SLF_Q_DONE };

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/*
 * Send one Get of `attr` on (lid, port) with transaction id `tid`: a PMA query of
 * PortCounters(Extended) (port in PortSelect), or a LID-routed SMP PortInfo (port in the
 * attribute modifier; a switch answers for any of its ports). The kernel gets the handle's
 * timeout so it matches the answer to this request (and reports a timeout as a failed
 * receive); retries are ours, with a fresh transaction id each time.
 */
static int send_query(struct slf *h, void *umad, uint8_t mgtclass, unsigned attr, uint16_t lid,
		      int port, uint64_t tid)
{
	uint8_t data[IB_PC_DATA_SZ] = {0};
	ib_portid_t dest = {0};
	ib_rpc_t rpc = {0};
	int len;

	dest.lid = lid;
	rpc.mgtclass = mgtclass;
	rpc.method = IB_MAD_METHOD_GET;
	rpc.attr.id = attr;
	rpc.timeout = h->timeout_ms;
	rpc.trid = tid;
	if (mgtclass == IB_SMI_CLASS) {
		rpc.attr.mod = (unsigned)port;
		rpc.datasz = IB_SMP_DATA_SIZE;
		rpc.dataoffs = IB_SMP_DATA_OFFS;
		len = mad_build_pkt(umad, &rpc, &dest, NULL, NULL);
	} else {
		dest.qp = 1;
		dest.qkey = IB_DEFAULT_QP1_QKEY;
		rpc.datasz = IB_PC_DATA_SZ;
		rpc.dataoffs = IB_PC_DATA_OFFS;
		/* PortSelect sits at the same place in PortCounters and PortCountersExtended. */
		mad_set_field(data, 0, IB_PC_PORT_SELECT_F, port);
		len = mad_build_pkt(umad, &rpc, &dest, NULL, data);
	}
	if (len < 0)
		return -1;
	return umad_send(mad_rpc_portid(h->port), mad_rpc_class_agent(h->port, mgtclass), umad, len,
			 h->timeout_ms, 0);
}

/* Store the answer `data` (the PMA payload) of a PortCountersExtended query in `row`. */
static void take_extended(uint8_t *data, uint64_t *row)
{
	for (int c = 0; c < SLF_NUM_COUNTERS; c++)
		if (extended_field[c] != IB_NO_FIELD)
			row[c] = mad_get_field64(data, 0, extended_field[c]);
}

/*
 * Store the answer of a PortCounters query: the counters without an extended form in `row`,
 * the 32-bit forms of the others in `basic_data` (a row of its own, used when the extended
 * query did not answer).
 */
static void take_basic(uint8_t *data, uint64_t *row, uint64_t *basic_data)
{
	for (int c = 0; c < SLF_NUM_COUNTERS; c++) {
		if (extended_field[c] != IB_NO_FIELD)
			basic_data[c] = mad_get_field(data, 0, basic_field[c]);
		else
			row[c] = mad_get_field(data, 0, basic_field[c]);
	}
}

/* The LID a query goes to: its target's, or its probe's. */
static uint16_t query_lid(const struct slf_query *qr, const uint16_t *lids, const uint16_t *probe_lids)
{
	return qr->mgtclass == IB_SMI_CLASS ? probe_lids[qr->target] : lids[qr->target];
}

/* The port a query asks about: its target's, or its probe's. */
static int query_port(const struct slf_query *qr, const uint8_t *ports, const uint8_t *probe_ports)
{
	return qr->mgtclass == IB_SMI_CLASS ? probe_ports[qr->target] : ports[qr->target];
}

/*
 * Read the counters of n targets (lids[i], ports[i]) and the port state of m probes
 * (probe_lids[j], probe_ports[j]: switch ports). ext[i] != 0: try PortCountersExtended for
 * the data/packet counters. out has n rows of SLF_NUM_COUNTERS raw values; status[i] gets
 * SLF_OK_* bits; probe_state[j] gets PortInfo's PortState | PortPhysicalState << 4 (0: no
 * answer). Returns the number of targets with any answer, or -ENOMEM.
 *
 * Up to SLF_WINDOW queries are in flight at once on the handle's MAD port, each with its
 * own transaction id (base + query + attempt * queries), so answers are matched whatever
 * order they come back in; a query unanswered after the timeout is sent again up to the
 * handle's retries, then counted as not answered. The values are the same as one
 * pma_query_via (smp_query_via) per query would read.
 */
int slf_sweep(struct slf *h, int n, const uint16_t *lids, const uint8_t *ports,
	      const uint8_t *ext, uint64_t *out, uint8_t *status, int m,
	      const uint16_t *probe_lids, const uint8_t *probe_ports, uint8_t *probe_state)
{
	size_t umad_len = umad_size() + IB_MAD_SIZE;
	int total = 2 * n + m, answered = 0, inflight = 0, open = 0, next = 0, i, q;
	int fd = mad_rpc_portid(h->port);
	uint32_t base = (uint32_t)mad_trid();
	struct slf_query *queries = calloc((size_t)total + 1, sizeof(*queries));
	uint64_t *basic_data = calloc((size_t)n * SLF_NUM_COUNTERS + 1, sizeof(*basic_data));
	void *send_buf = umad_alloc(1, umad_len), *recv_buf = umad_alloc(1, umad_len);

	if (!queries || !basic_data || !send_buf || !recv_buf) {
		free(queries);
		free(basic_data);
		umad_free(send_buf);
		umad_free(recv_buf);
		return -ENOMEM;
	}
	memset(out, 0, (size_t)n * SLF_NUM_COUNTERS * sizeof(*out));
	memset(status, 0, (size_t)n);
	memset(probe_state, 0, (size_t)m);
	for (q = 0; q < total; q++) {
		struct slf_query *qr = &queries[q];

		if (q < 2 * n) {
			qr->target = q / 2;
			qr->mgtclass = IB_PERFORMANCE_CLASS;
			qr->attr = q % 2 ? IB_GSI_PORT_COUNTERS : IB_GSI_PORT_COUNTERS_EXT;
			qr->state = (q % 2 || ext[q / 2]) ? SLF_Q_WAITING : SLF_Q_DONE;
		} else {
			qr->target = q - 2 * n;
			qr->mgtclass = IB_SMI_CLASS;
			qr->attr = IB_ATTR_PORT_INFO;
			qr->state = SLF_Q_WAITING;
		}
		open += qr->state == SLF_Q_WAITING;
	}
	while (open > 0) {
		double now;
		int len = (int)umad_len, rc;

		for (; next < total && inflight < SLF_WINDOW; next++) {
			struct slf_query *qr = &queries[next];

			if (qr->state != SLF_Q_WAITING)
				continue;
			qr->state = SLF_Q_SENT;
			qr->sent_ms = now_ms();
			inflight++;
			if (send_query(h, send_buf, qr->mgtclass, qr->attr, query_lid(qr, lids, probe_lids),
				       query_port(qr, ports, probe_ports), base + (uint32_t)next) < 0)
				qr->sent_ms = 0; /* expires at once: retried or given up below */
		}
		rc = umad_recv(fd, recv_buf, &len, inflight ? 5 : 0);
		if (rc >= 0) {
			uint8_t *mad = umad_get_mad(recv_buf);
			uint32_t off = (uint32_t)mad_get_field64(mad, 0, IB_MAD_TRID_F) - base;
			struct slf_query *qr;

			q = (int)(off % (uint32_t)(total ? total : 1));
			qr = &queries[q];
			if (off / (uint32_t)total != qr->attempt || qr->state != SLF_Q_SENT)
				continue; /* an answer to an earlier attempt, or not ours */
			if (umad_status(recv_buf) != 0 || mad_get_field(mad, 0, IB_MAD_STATUS_F) != 0) {
				qr->sent_ms = 0; /* timed out or refused: retry below */
			} else {
				if (qr->mgtclass == IB_SMI_CLASS) {
					uint8_t *info = mad + IB_SMP_DATA_OFFS;

					probe_state[qr->target] =
						(uint8_t)(mad_get_field(info, 0, IB_PORT_STATE_F) |
							  mad_get_field(info, 0, IB_PORT_PHYS_STATE_F) << 4);
				} else {
					uint64_t *row = out + (size_t)qr->target * SLF_NUM_COUNTERS;

					if (qr->attr == IB_GSI_PORT_COUNTERS_EXT) {
						take_extended(mad + IB_PC_DATA_OFFS, row);
						status[qr->target] |= SLF_OK_EXTENDED;
					} else {
						take_basic(mad + IB_PC_DATA_OFFS, row,
							   basic_data + (size_t)qr->target * SLF_NUM_COUNTERS);
						status[qr->target] |= SLF_OK_BASIC;
					}
				}
				qr->state = SLF_Q_DONE;
				inflight--;
				open--;
				continue;
			}
		}
		/* Expired queries: send again with a fresh transaction id, or give up. */
		now = now_ms();
		for (q = 0; q < next; q++) {
			struct slf_query *qr = &queries[q];

			if (qr->state != SLF_Q_SENT || now - qr->sent_ms < h->timeout_ms)
				continue;
			if (qr->attempt < h->retries) {
				qr->attempt++;
				qr->sent_ms = now;
				if (send_query(h, send_buf, qr->mgtclass, qr->attr,
					       query_lid(qr, lids, probe_lids), query_port(qr, ports, probe_ports),
					       base + (uint32_t)q + (uint32_t)qr->attempt * (uint32_t)total) < 0)
					qr->sent_ms = 0;
			} else {
				qr->state = SLF_Q_DONE;
				inflight--;
				open--;
			}
		}
	}
	for (i = 0; i < n; i++) {
		if ((status[i] & SLF_OK_BASIC) && !(status[i] & SLF_OK_EXTENDED))
			for (int c = 0; c < SLF_NUM_COUNTERS; c++)
				if (extended_field[c] != IB_NO_FIELD)
					out[(size_t)i * SLF_NUM_COUNTERS + c] =
						basic_data[(size_t)i * SLF_NUM_COUNTERS + c];
		if (status[i])
			answered++;
	}
	free(queries);
	free(basic_data);
	umad_free(send_buf);
	umad_free(recv_buf);
	return answered;
}
