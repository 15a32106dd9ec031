// Package ckptfile is the on-disk shape of every distrl checkpoint (the
// trainer's learner state, the replay worker's tables): a checked header
// around a msgpack payload, written atomically, numbered in the file name,
// the newest few kept, and a corrupt newest file skipped for the one before.
//
// File layout: a 24-byte header, then the payload.
//
//	offset  size  field
//	0       8     magic "DRLCKPT\x00"
//	8       4     format version, little-endian uint32 (1)
//	12      4     CRC-32C (Castagnoli) of the payload
//	16      8     payload length in bytes, little-endian uint64
//	24      n     payload (msgpack)
//
// The length catches a file cut short by a crash or a full disk, the CRC a
// damaged one. WriteStream writes the payload as it is encoded and the
// header after it, so a large checkpoint is never held in memory whole.
// The payload is checked with msgpackcheck before a decoder
// sees it, so a crafted file cannot make the reader allocate without bound.
package ckptfile
