// Package msgpackcheck checks that a byte slice holds exactly one
// well-formed msgpack value whose every length and element count fits in
// the bytes actually present, before a decoder trusts those headers.
//
// The msgpack library allocates what a header claims before it reads the
// bytes (a 9-byte message can claim a 4 GB string or a 4-billion-element
// array). Check walks the value without decoding or allocating anything and
// rejects:
//
//   - a str, bin or ext length larger than the bytes that remain;
//   - an array count larger than the bytes that remain, or a map count
//     larger than half of them (every element takes at least one byte);
//   - containers nested deeper than MaxDepth (the library decodes
//     recursively);
//   - the byte 0xc1, which msgpack never uses;
//   - a value cut short, and bytes after the value.
//
// Once Check accepts b, every count and length in it is backed by real
// bytes, so decoding b allocates at most a constant factor times len(b).
// Every decoder of bytes that come from a peer or a file (rpc requests and
// replies, stream and paramstream frames, checkpoints) calls Check first.
package msgpackcheck
