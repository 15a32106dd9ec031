// Package mptest builds hostile msgpack frames for tests and fuzz seeds:
// values whose str, bin, ext, array and map headers claim up to 4 GB while
// only a few bytes follow, alone, inside rpc requests and inside the maps
// of the data-plane messages.
package mptest
