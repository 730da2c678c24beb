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
 *     list of (LID, port) targets. Raw values only: words stay words, the Python side
 *     converts once at parse time. Counters are only read, never reset.
 * One slf handle owns one MAD port and slf_sweep issues one query at a time on it; sweeps
 * run in parallel by giving slices of the target list to several worker processes, each
 * with its own handle (umad2sim serves one working MAD port per process).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <infiniband/ibnetdisc.h>
#include <infiniband/mad.h>

/* PMA ClassPortInfo capability bits (IBA 16.1.2, PortCountersExtended support). */
#define SLF_PM_EXT_WIDTH_SUPPORTED 0x0200
#define SLF_PM_EXT_WIDTH_NOIETF_SUP 0x0400

/*
 * Layout of one target's output row in slf_sweep: column SLF_<NAME> holds the counter
 * the Python side calls <name> (stacklens.constants.PORT_COUNTERS, data in words).
 * collector/fabric/mad.py checks its mirror against slf_abi() and slf_counter_name().
 */
#define SLF_COUNTERS(X)                                      \
	X(XMIT_WORDS, "xmit_bytes")                          \
	X(RCV_WORDS, "rcv_bytes")                            \
	X(XMIT_PKTS, "xmit_pkts")                            \
	X(RCV_PKTS, "rcv_pkts")                              \
	X(XMIT_WAIT, "xmit_wait")                            \
	X(SYMBOL_ERRORS, "symbol_errors")                    \
	X(LINK_ERROR_RECOVERY, "link_error_recovery")        \
	X(LINK_DOWNED, "link_downed")                        \
	X(RCV_ERRORS, "rcv_errors")                          \
	X(XMIT_DISCARDS, "xmit_discards")                    \
	X(VL15_DROPPED, "vl15_dropped")

#define SLF_COLUMN(name, py) SLF_##name,
enum { SLF_COUNTERS(SLF_COLUMN) SLF_NUM_COUNTERS };
#undef SLF_COLUMN

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
#define SLF_NAME(name, py) py,
	static const char *const names[] = { SLF_COUNTERS(SLF_NAME) };
#undef SLF_NAME
	return i >= 0 && i < SLF_NUM_COUNTERS ? names[i] : NULL;
}

struct slf {
	struct ibmad_port *port;
	int timeout_ms;
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

/* Query one PMA attribute of (lid, port) into buf; 1 if answered. */
static int pma(struct slf *h, uint16_t lid, int port, unsigned attr, uint8_t *buf)
{
	ib_portid_t dest = {0};

	dest.lid = lid;
	dest.qp = 1;
	dest.qkey = IB_DEFAULT_QP1_QKEY;
	memset(buf, 0, 1024);
	return pma_query_via(buf, &dest, port, h->timeout_ms, attr, h->port) != NULL;
}

/*
 * Read the counters of n targets (lids[i], ports[i]). ext[i] != 0: try
 * PortCountersExtended for the data/packet counters. out has n rows of SLF_NUM_COUNTERS
 * raw values; status[i] gets SLF_OK_* bits. Returns the number of targets with any answer.
 */
int slf_sweep(struct slf *h, int n, const uint16_t *lids, const uint8_t *ports,
	      const uint8_t *ext, uint64_t *out, uint8_t *status)
{
	uint8_t buf[1024];
	int i, answered = 0;

	for (i = 0; i < n; i++) {
		uint64_t *row = out + (size_t)i * SLF_NUM_COUNTERS;

		memset(row, 0, SLF_NUM_COUNTERS * sizeof(*row));
		status[i] = 0;
		if (ext[i] && pma(h, lids[i], ports[i], IB_GSI_PORT_COUNTERS_EXT, buf)) {
			status[i] |= SLF_OK_EXTENDED;
			row[SLF_XMIT_WORDS] = mad_get_field64(buf, 0, IB_PC_EXT_XMT_BYTES_F);
			row[SLF_RCV_WORDS] = mad_get_field64(buf, 0, IB_PC_EXT_RCV_BYTES_F);
			row[SLF_XMIT_PKTS] = mad_get_field64(buf, 0, IB_PC_EXT_XMT_PKTS_F);
			row[SLF_RCV_PKTS] = mad_get_field64(buf, 0, IB_PC_EXT_RCV_PKTS_F);
		}
		if (pma(h, lids[i], ports[i], IB_GSI_PORT_COUNTERS, buf)) {
			status[i] |= SLF_OK_BASIC;
			if (!(status[i] & SLF_OK_EXTENDED)) {
				row[SLF_XMIT_WORDS] = mad_get_field(buf, 0, IB_PC_XMT_BYTES_F);
				row[SLF_RCV_WORDS] = mad_get_field(buf, 0, IB_PC_RCV_BYTES_F);
				row[SLF_XMIT_PKTS] = mad_get_field(buf, 0, IB_PC_XMT_PKTS_F);
				row[SLF_RCV_PKTS] = mad_get_field(buf, 0, IB_PC_RCV_PKTS_F);
			}
			row[SLF_XMIT_WAIT] = mad_get_field(buf, 0, IB_PC_XMT_WAIT_F);
			row[SLF_SYMBOL_ERRORS] = mad_get_field(buf, 0, IB_PC_ERR_SYM_F);
			row[SLF_LINK_ERROR_RECOVERY] = mad_get_field(buf, 0, IB_PC_LINK_RECOVERS_F);
			row[SLF_LINK_DOWNED] = mad_get_field(buf, 0, IB_PC_LINK_DOWNED_F);
			row[SLF_RCV_ERRORS] = mad_get_field(buf, 0, IB_PC_ERR_RCV_F);
			row[SLF_XMIT_DISCARDS] = mad_get_field(buf, 0, IB_PC_XMT_DISCARDS_F);
			row[SLF_VL15_DROPPED] = mad_get_field(buf, 0, IB_PC_VL15_DROPPED_F);
		}
		if (status[i])
			answered++;
	}
	return answered;
}
