package csi

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// ErrMissingCapability is wrapped by Connect when the driver lacks a
// capability snapshots cannot do without (CREATE_DELETE_SNAPSHOT).
var ErrMissingCapability = errors.New("CSI driver lacks a required capability")

// MayBeInProgress reports whether err leaves open that the operation is
// still running (or already happened) on the backend: the gRPC codes
// Canceled, DeadlineExceeded, Unavailable, ResourceExhausted and Aborted,
// and any error that carries no gRPC status at all (we do not know what
// happened). The caller must keep the being-created mark and retry: this is
// the CSI contract on which "no leaked snapshot after a timed-out
// CreateSnapshot" rests (docs/contract.md, "Error classes";
// external-snapshotter issue 134). It is false for nil.
//
// This is the single place where CSI errors are classified.
func MayBeInProgress(err error) bool {
	if err == nil {
		return false
	}
	st, ok := grpcStatus(err)
	if !ok {
		return true
	}
	switch st.Code() {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return true
	}
	return false
}

// IsFinal reports whether err is a definite answer from the driver: the
// operation did not happen and retrying the same call will not change that
// by itself (a "final" error in the CSI spec's sense). It is false for nil.
func IsFinal(err error) bool {
	return err != nil && !MayBeInProgress(err)
}

// RejectsRequest reports whether err is the driver refusing the request
// itself (InvalidArgument, NotFound, FailedPrecondition, OutOfRange,
// Unimplemented): the same request could not have cut a snapshot on an
// earlier attempt either. Other final errors (Internal, Unknown, DataLoss,
// PermissionDenied, Unauthenticated) say only that this call did nothing:
// after an earlier attempt that may still be cutting (a lost reply, a
// timeout), they prove nothing about that attempt, and dropping the
// being-created mark on them would forget a snapshot that exists
// (docs/contract.md, "Error classes"). It is false for nil and for errors
// that may be in progress.
func RejectsRequest(err error) bool {
	if !IsFinal(err) {
		return false
	}
	switch Code(err) {
	case codes.InvalidArgument, codes.NotFound, codes.FailedPrecondition, codes.OutOfRange, codes.Unimplemented:
		return true
	}
	return false
}

// Code returns the gRPC code carried by err (wrapped or not): codes.OK for
// nil and codes.Unknown for an error without a gRPC status.
func Code(err error) codes.Code {
	if err == nil {
		return codes.OK
	}
	if st, ok := grpcStatus(err); ok {
		return st.Code()
	}
	return codes.Unknown
}

// DriverMessage returns the driver's own error text (the gRPC status
// message, without our wrapping), fit for status.error of a content, or
// err.Error() when err carries no status. The message is the driver's; our
// requests never put secrets into errors.
func DriverMessage(err error) string {
	if err == nil {
		return ""
	}
	if st, ok := grpcStatus(err); ok {
		return st.Code().String() + ": " + st.Message()
	}
	return err.Error()
}

// grpcStatus finds the gRPC status inside err, unwrapping %w chains, and
// returns it with its original message (status.FromError would return the
// whole wrapped text as the message).
func grpcStatus(err error) (*status.Status, bool) {
	var se interface{ GRPCStatus() *status.Status }
	if errors.As(err, &se) {
		if st := se.GRPCStatus(); st != nil {
			return st, true
		}
	}
	return nil, false
}
