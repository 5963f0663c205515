package csi

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// classCase is one error and how the classification must read it.
type classCase struct {
	err          error
	inProgress   bool
	final        bool
	code         codes.Code
	driverSaying string
}

func TestClassification(t *testing.T) {
	tests := map[string]classCase{
		"no error is neither": {
			err: nil, code: codes.OK,
		},
		"an error without gRPC status may still run": {
			err: errors.New("connection reset"), inProgress: true, code: codes.Unknown, driverSaying: "connection reset",
		},
		"a bare context error may still run": {
			err: context.DeadlineExceeded, inProgress: true, code: codes.Unknown,
		},
		"a wrapped final status keeps its class and message": {
			err:   fmt.Errorf("CreateSnapshot %q: %w", "s1", status.Error(codes.Internal, "disk on fire")),
			final: true, code: codes.Internal, driverSaying: "Internal: disk on fire",
		},
		"a doubly wrapped in-progress status keeps its class": {
			err:        fmt.Errorf("outer: %w", fmt.Errorf("inner: %w", status.Error(codes.Unavailable, "u"))),
			inProgress: true, code: codes.Unavailable, driverSaying: "Unavailable: u",
		},
	}
	// A status straight from the driver: the codes of a call that may
	// still run on the backend, then those that mean it did nothing.
	for _, c := range []codes.Code{codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted} {
		tests[fmt.Sprintf("%v from the driver may still run", c)] = classCase{
			err: status.Error(c, "the driver's words"), inProgress: true, code: c, driverSaying: fmt.Sprintf("%v: the driver's words", c),
		}
	}
	for _, c := range []codes.Code{codes.InvalidArgument, codes.Unknown, codes.Internal, codes.AlreadyExists, codes.NotFound, codes.FailedPrecondition} {
		tests[fmt.Sprintf("%v from the driver is final", c)] = classCase{
			err: status.Error(c, "the driver's words"), final: true, code: c, driverSaying: fmt.Sprintf("%v: the driver's words", c),
		}
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := MayBeInProgress(tc.err); got != tc.inProgress {
				t.Errorf("MayBeInProgress = %v, want %v", got, tc.inProgress)
			}
			if got := IsFinal(tc.err); got != tc.final {
				t.Errorf("IsFinal = %v, want %v", got, tc.final)
			}
			if got := Code(tc.err); got != tc.code {
				t.Errorf("Code = %v, want %v", got, tc.code)
			}
			if tc.driverSaying != "" {
				if got := DriverMessage(tc.err); got != tc.driverSaying {
					t.Errorf("DriverMessage = %q, want %q", got, tc.driverSaying)
				}
			}
		})
	}
}

// Every code is exactly one of the two classes.
func TestClassificationIsExhaustive(t *testing.T) {
	for c := codes.Canceled; c <= codes.Unauthenticated; c++ {
		err := status.Error(c, "x")
		if MayBeInProgress(err) == IsFinal(err) {
			t.Errorf("%v: MayBeInProgress and IsFinal agree", c)
		}
	}
}

func TestWrappedErrorsStillUnwrapToStatus(t *testing.T) {
	err := fmt.Errorf("CSI driver %q: DeleteSnapshot %q: %w", "d", "1", status.Error(codes.PermissionDenied, "no"))
	st, ok := status.FromError(err)
	if !ok || st.Code() != codes.PermissionDenied {
		t.Fatalf("status.FromError = %v, %v; want PermissionDenied", st, ok)
	}
	var se interface{ GRPCStatus() *status.Status }
	if !errors.As(err, &se) {
		t.Fatalf("errors.As found no GRPCStatus in %v", err)
	}
}

func TestGRPCTarget(t *testing.T) {
	tests := map[string]string{
		"/run/csi/socket":        "unix:///run/csi/socket",
		"unix:///run/csi/socket": "unix:///run/csi/socket",
		"unix:/run/csi/socket":   "unix:/run/csi/socket",
		"relative/csi.sock":      "unix:relative/csi.sock",
	}
	for in, want := range tests {
		if got := grpcTarget(in); got != want {
			t.Errorf("grpcTarget(%q) = %q, want %q", in, got, want)
		}
	}
}

// Only a driver refusing the request proves that an earlier attempt of the
// same request cut nothing either.
func TestRejectsRequest(t *testing.T) {
	for code, want := range map[codes.Code]bool{
		codes.InvalidArgument: true, codes.NotFound: true, codes.FailedPrecondition: true, codes.OutOfRange: true, codes.Unimplemented: true,
		codes.Internal: false, codes.Unknown: false, codes.DataLoss: false, codes.PermissionDenied: false, codes.Unauthenticated: false,
		codes.AlreadyExists: false, codes.DeadlineExceeded: false, codes.Aborted: false, codes.Unavailable: false,
	} {
		if got := RejectsRequest(fmt.Errorf("wrapped: %w", status.Error(code, "x"))); got != want {
			t.Errorf("RejectsRequest(%s) = %v, want %v", code, got, want)
		}
	}
	if RejectsRequest(nil) || RejectsRequest(errors.New("no status")) {
		t.Error("RejectsRequest of nil or of an error without status is true")
	}
}
