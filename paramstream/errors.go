package paramstream

import (
	"errors"
	"fmt"
)

var (
	// ErrNoPublisher is returned by Subscriber.Fetch when no publisher has
	// a record for the policy: no trainer has published yet, or the last
	// one is gone. Subscribers keep what they have and follow the record
	// when one appears.
	ErrNoPublisher = errors.New("paramstream: no publisher for the policy")

	// ErrUnavailable is wrapped by fetch failures that may pass: the
	// publisher could not be reached, or did not answer within the fetch
	// timeout.
	ErrUnavailable = errors.New("paramstream: publisher unavailable")

	// ErrNoParams is wrapped by a RemoteError whose publisher has no
	// version as new as the one asked for (it has not published yet, or a
	// notification overtook the record).
	ErrNoParams = errors.New("paramstream: publisher has no such version")

	// ErrStaleVersion is returned by Publisher.Publish for a version that
	// is not newer than the last one published: subscribers would ignore
	// it, so it is refused where the mistake is made.
	ErrStaleVersion = errors.New("paramstream: version not newer than the last published")

	// ErrClosed is returned by methods called after Close.
	ErrClosed = errors.New("paramstream: closed")
)

// Error codes a publisher puts in the "error" field of a fetch reply.
const (
	CodeNoParams      = "no_params"
	CodeUnknownPolicy = "unknown_policy"
)

// RemoteError is an error reply from a publisher. errors.Is(err,
// ErrNoParams) holds for the code "no_params".
type RemoteError struct {
	Code    string
	Message string
	Version int64 // the publisher's newest version, -1 if none
}

func (e *RemoteError) Error() string {
	return fmt.Sprintf("paramstream: publisher replied %s: %s (its newest version: %d)", e.Code, e.Message, e.Version)
}

// Unwrap maps known codes to their sentinel errors.
func (e *RemoteError) Unwrap() error {
	if e.Code == CodeNoParams {
		return ErrNoParams
	}
	return nil
}
