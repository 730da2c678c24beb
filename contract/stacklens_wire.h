/*
 * stacklens_wire.h — C view of the stacklens wire format.
 *
 * Expands stacklens_wire.def (the only definition of the format, shared with
 * the Python side) into packed structs: the frame header sl_frame_header, one
 * record struct sl_rec_<table> per counter table, the acknowledgement sl_ack,
 * the table id enum (SL_TABLE_<table>), the ack status enum
 * (SL_STATUS_<name>), the status names, the frame types (SL_FRAME_<name>),
 * the bounds (SL_BOUND_<name>), the connection's hello (sl_hello), welcome
 * (sl_welcome) and credential message (sl_cred), and the proofs
 * (SL_PROOF_<name>), and the file-system I/O layers (enum sl_io_layer:
 * SL_IO_<name>, SL_IO_LAYER_END; sl_io_layer_name). Nothing here is written by hand except
 * the constants the .def only states in its doc strings (magics, version)
 * and the section header size.
 *
 * Integers are little-endian on the wire; the structs are written as they lie
 * in memory, so only little-endian hosts are supported (checked below).
 */
#ifndef STACKLENS_WIRE_H
#define STACKLENS_WIRE_H

#include <stddef.h>
#include <stdint.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "stacklens writes wire structs as they lie in memory: little-endian hosts only"
#endif

/* Constants that the .def states in the doc strings of its fields. */
#define SL_FRAME_MAGIC    0x534E4C53u /* bytes 'SLNS' */
#define SL_ACK_MAGIC      0x4B414C53u /* bytes 'SLAK' */
#define SL_HELLO_MAGIC    0x49484C53u /* bytes 'SLHI' */
#define SL_WELCOME_MAGIC  0x45574C53u /* bytes 'SLWE' */
#define SL_CRED_MAGIC     0x52434C53u /* bytes 'SLCR' */
#define SL_WIRE_VERSION   2u

/* A body section starts with u16 table id, u16 record size, u32 record count. */
#define SL_SECTION_HEADER_SIZE 8u

#define SL_PACKED __attribute__((packed))

/*
 * The .def invokes twelve macros. All of them expand to nothing by default;
 * each pass below redefines the one it needs, includes the .def, and puts the
 * default back.
 */
#define SL_NOTHING3(a, b, c)
#define SL_NOTHING4(a, b, c, d)
#define SL_HEADER_FIELD SL_NOTHING3
#define SL_ACK_FIELD    SL_NOTHING3
#define SL_STATUS       SL_NOTHING3
#define SL_TABLE        SL_NOTHING3
#define SL_FIELD        SL_NOTHING4
#define SL_FRAME_TYPE   SL_NOTHING3
#define SL_BOUND        SL_NOTHING3
#define SL_HELLO_FIELD  SL_NOTHING3
#define SL_WELCOME_FIELD SL_NOTHING3
#define SL_PROOF        SL_NOTHING3
#define SL_CRED_FIELD   SL_NOTHING3
#define SL_IO_LAYER     SL_NOTHING4

/*
 * Field types of the .def mapped to "C type, array suffix": SL_TY_u32 gives
 * "uint32_t," and SL_TY_text(64) gives "char, [64]". SL_MEMBER turns a field
 * name plus such a pair into a struct member declaration.
 */
#define SL_TY_u16     uint16_t,
#define SL_TY_u32     uint32_t,
#define SL_TY_u64     uint64_t,
#define SL_TY_text(n) char, [n]
#define SL_MEMBER(name, ty)          SL_MEMBER_(name, ty)
#define SL_MEMBER_(name, ctype, dim) ctype name dim;

/* ---- frame header ------------------------------------------------------ */
typedef struct SL_PACKED sl_frame_header {
#undef  SL_HEADER_FIELD
#define SL_HEADER_FIELD(name, type, doc) SL_MEMBER(name, SL_TY_##type)
#include "stacklens_wire.def"
#undef  SL_HEADER_FIELD
#define SL_HEADER_FIELD SL_NOTHING3
} sl_frame_header;

/* ---- acknowledgement --------------------------------------------------- */
typedef struct SL_PACKED sl_ack {
#undef  SL_ACK_FIELD
#define SL_ACK_FIELD(name, type, doc) SL_MEMBER(name, SL_TY_##type)
#include "stacklens_wire.def"
#undef  SL_ACK_FIELD
#define SL_ACK_FIELD SL_NOTHING3
} sl_ack;

/* ---- hello and welcome (connection start, proven mode) ----------------- */
typedef struct SL_PACKED sl_hello {
#undef  SL_HELLO_FIELD
#define SL_HELLO_FIELD(name, type, doc) SL_MEMBER(name, SL_TY_##type)
#include "stacklens_wire.def"
#undef  SL_HELLO_FIELD
#define SL_HELLO_FIELD SL_NOTHING3
} sl_hello;

typedef struct SL_PACKED sl_welcome {
#undef  SL_WELCOME_FIELD
#define SL_WELCOME_FIELD(name, type, doc) SL_MEMBER(name, SL_TY_##type)
#include "stacklens_wire.def"
#undef  SL_WELCOME_FIELD
#define SL_WELCOME_FIELD SL_NOTHING3
} sl_welcome;

typedef struct SL_PACKED sl_cred {
#undef  SL_CRED_FIELD
#define SL_CRED_FIELD(name, type, doc) SL_MEMBER(name, SL_TY_##type)
#include "stacklens_wire.def"
#undef  SL_CRED_FIELD
#define SL_CRED_FIELD SL_NOTHING3
} sl_cred;

enum sl_proof {
#undef  SL_PROOF
#define SL_PROOF(code, name, doc) SL_PROOF_##name = code,
#include "stacklens_wire.def"
#undef  SL_PROOF
#define SL_PROOF SL_NOTHING3
};

/* ---- table ids --------------------------------------------------------- */
enum sl_table_id {
#undef  SL_TABLE
#define SL_TABLE(id, name, doc) SL_TABLE_##name = id,
#include "stacklens_wire.def"
#undef  SL_TABLE
#define SL_TABLE SL_NOTHING3
};

/* ---- acknowledgement statuses ------------------------------------------ */
enum sl_status {
#undef  SL_STATUS
#define SL_STATUS(code, name, doc) SL_STATUS_##name = code,
#include "stacklens_wire.def"
#undef  SL_STATUS
#define SL_STATUS SL_NOTHING3
};

/* ---- frame types ------------------------------------------------------- */
enum sl_frame_type {
#undef  SL_FRAME_TYPE
#define SL_FRAME_TYPE(code, name, doc) SL_FRAME_##name = code,
#include "stacklens_wire.def"
#undef  SL_FRAME_TYPE
#define SL_FRAME_TYPE SL_NOTHING3
};

/* ---- bounds (values up to 2^32 - 1: an enum of GCC's extended range) ---- */
enum sl_bound {
#undef  SL_BOUND
#define SL_BOUND(name, value, doc) SL_BOUND_##name = value##ull,
#include "stacklens_wire.def"
#undef  SL_BOUND
#define SL_BOUND SL_NOTHING3
};

/* ---- file-system I/O layers (io.layer) -------------------------------- */
enum sl_io_layer {
#undef  SL_IO_LAYER
#define SL_IO_LAYER(id, name, label, doc) SL_IO_##name = id,
#include "stacklens_wire.def"
#undef  SL_IO_LAYER
#define SL_IO_LAYER SL_NOTHING4
};

/* One past the largest layer id: the size of an array indexed by layer (a union
 * of char[id] per layer is as large as the largest id). */
union sl_io_layer_ids_ {
#undef  SL_IO_LAYER
#define SL_IO_LAYER(id, name, label, doc) char name[id];
#include "stacklens_wire.def"
#undef  SL_IO_LAYER
#define SL_IO_LAYER SL_NOTHING4
};
#define SL_IO_LAYER_END (sizeof(union sl_io_layer_ids_) + 1)
_Static_assert(SL_IO_LAYER_END - 1 == SL_BOUND_max_io_layer,
               "SL_BOUND max_io_layer must be the largest SL_IO_LAYER id");

/* The STACKLENS_DISABLE word of layer (its .def name, matched in any case), NULL if
 * the id is no layer's. */
static inline const char *sl_io_layer_name(unsigned layer)
{
    switch (layer) {
#undef  SL_IO_LAYER
#define SL_IO_LAYER(id, name, label, doc) case id: return #name;
#include "stacklens_wire.def"
#undef  SL_IO_LAYER
#define SL_IO_LAYER SL_NOTHING4
    default: return NULL;
    }
}

/* Name of an acknowledgement status as the .def spells it, "unknown" if none. */
static inline const char *sl_status_name(unsigned code)
{
    switch (code) {
#undef  SL_STATUS
#define SL_STATUS(code, name, doc) case code: return #name;
#include "stacklens_wire.def"
#undef  SL_STATUS
#define SL_STATUS SL_NOTHING3
    default: return "unknown";
    }
}

/*
 * ---- one record struct per table ----------------------------------------
 * The .def lists each SL_TABLE followed by its SL_FIELDs, so every SL_TABLE
 * closes the struct before it and opens struct sl_rec_<name>. The first
 * SL_TABLE closes sl_rec_open_, a placeholder that only exists to be closed.
 */
struct SL_PACKED sl_rec_open_ {
    char unused_;
#undef  SL_TABLE
#undef  SL_FIELD
#define SL_TABLE(id, name, doc)          } SL_PACKED; struct SL_PACKED sl_rec_##name {
#define SL_FIELD(table, name, type, doc) SL_MEMBER(name, SL_TY_##type)
#include "stacklens_wire.def"
#undef  SL_FIELD
#define SL_FIELD SL_NOTHING4
};

/* Typedef names sl_rec_<table> for the record structs. */
#undef  SL_TABLE
#define SL_TABLE(id, name, doc) typedef struct sl_rec_##name sl_rec_##name;
#include "stacklens_wire.def"
#undef  SL_TABLE
#define SL_TABLE SL_NOTHING3

_Static_assert(sizeof(sl_frame_header) == 256, "frame header must be 256 bytes");
_Static_assert(sizeof(sl_ack) == 16, "ack must be 16 bytes");
_Static_assert(sizeof(sl_hello) == 32, "hello must be 32 bytes");
_Static_assert(sizeof(sl_welcome) == 32, "welcome must be 32 bytes");
_Static_assert(sizeof(sl_cred) == 8, "cred message must be 8 bytes");
_Static_assert(sizeof(sl_rec_rank_info) == 760, "rank_info record must be 760 bytes");
_Static_assert(sizeof(sl_rec_p2p) == 40, "p2p record must be 40 bytes");
_Static_assert(sizeof(sl_rec_op) == 32, "op record must be 32 bytes");

#endif /* STACKLENS_WIRE_H */
