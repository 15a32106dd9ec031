// Package grpcquiet silences gRPC's global logger for every program that
// imports the etcd backend or the embedded server.
//
// gRPC logs connection retries and transport errors straight to stderr,
// which for a name server that is briefly down means a screenful of
// noise in every worker; the etcd backend reports such conditions itself,
// as errors wrapping nameresolve.ErrUnavailable.
//
// It is done in init rather than in etcd.Open or etcdserver.Start because
// grpclog.SetLoggerV2 is not safe once gRPC is in use: by the time Open runs
// an embedded server or another gRPC user may already be logging, and the
// assignment would race with them.
package grpcquiet
