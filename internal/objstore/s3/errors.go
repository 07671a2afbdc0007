package s3

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"syscall"

	"github.com/minio/minio-go/v7"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// Sentinel errors, always wrapped.
var (
	// ErrUnavailable: the service could not be reached or answered with a
	// failure that may go away by itself (connection refused or reset,
	// timeout, HTTP 5xx, 429, SlowDown). The operation may be retried;
	// a Put that failed this way may or may not have stored the object.
	ErrUnavailable = errors.New("s3: service unavailable")
	// ErrNoBucket: the configured bucket does not exist.
	ErrNoBucket = errors.New("s3: bucket does not exist")
	// ErrAccessDenied: the service refused the credentials or the request
	// (bad keys, wrong region for the signature, missing permission).
	ErrAccessDenied = errors.New("s3: access denied")
	// ErrInvalidKey: the key breaks the rules in key.go.
	ErrInvalidKey = errors.New("s3: invalid key")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("s3: store closed")
)

// IsRetriable reports whether err is worth retrying: the service was
// unavailable, not wrong. Context cancellation is not retriable.
func IsRetriable(err error) bool {
	return errors.Is(err, ErrUnavailable)
}

// Error codes that mean "try again later", beyond the HTTP status.
var retriableCodes = map[string]bool{
	"RequestTimeout":             true,
	"RequestTimeTooSkewed":       false,
	"InternalError":              true,
	"ServiceUnavailable":         true,
	"SlowDown":                   true,
	"SlowDownRead":               true,
	"SlowDownWrite":              true,
	"Throttling":                 true,
	"ThrottlingException":        true,
	"RequestLimitExceeded":       true,
	"XMinioServerNotInitialized": true,
}

var deniedCodes = map[string]bool{
	"AccessDenied":                 true,
	"InvalidAccessKeyId":           true,
	"SignatureDoesNotMatch":        true,
	"ExpiredToken":                 true,
	"InvalidToken":                 true,
	"AuthorizationHeaderMalformed": true,
}

// wrap turns an error from minio-go into one of ours. ctx is the caller's:
// when it is done, its error is what the caller gets (wrapped), since the
// transport's error for a cancelled request says less.
func (s *Store) wrap(ctx context.Context, op, key string, err error) error {
	where := fmt.Sprintf("s3: %s %q", op, key)
	if ctx.Err() != nil && (errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || !isResponse(err)) {
		return fmt.Errorf("%s: %w", where, context.Cause(ctx))
	}
	resp := minio.ToErrorResponse(err)
	switch {
	case resp.Code == "NoSuchKey":
		return fmt.Errorf("%s: %w", where, objstore.ErrNotFound)
	case resp.Code == "NoSuchBucket":
		return fmt.Errorf("%s: %w: %q at %s", where, ErrNoBucket, s.cfg.Bucket, s.cfg.Endpoint)
	case deniedCodes[resp.Code] || resp.StatusCode == http.StatusForbidden:
		return fmt.Errorf("%s: %w: %s (%s)", where, ErrAccessDenied, resp.Code, resp.Message)
	case retriableCodes[resp.Code] || retriableStatus(resp.StatusCode):
		return fmt.Errorf("%s: %w: %s %d: %s", where, ErrUnavailable, resp.Code, resp.StatusCode, resp.Message)
	case resp.Code != "" || resp.StatusCode != 0:
		return fmt.Errorf("%s: %s %d: %w", where, resp.Code, resp.StatusCode, err)
	case isNetwork(err):
		return fmt.Errorf("%s: %w: %w", where, ErrUnavailable, err)
	}
	return fmt.Errorf("%s: %w", where, err)
}

func isResponse(err error) bool {
	r := minio.ToErrorResponse(err)
	return r.Code != "" || r.StatusCode != 0
}

func retriableStatus(code int) bool {
	switch code {
	case http.StatusRequestTimeout, http.StatusTooManyRequests, 499,
		http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// isNetwork reports a transport failure: the request may not have reached
// the service, or its answer did not reach us.
func isNetwork(err error) bool {
	var ue *url.Error
	var ne net.Error
	var (
		unknownCA x509.UnknownAuthorityError
		badCert   x509.CertificateInvalidError
		badHost   x509.HostnameError
		tlsRecord tls.RecordHeaderError
	)
	switch {
	case errors.As(err, &unknownCA), errors.As(err, &badCert), errors.As(err, &badHost), errors.As(err, &tlsRecord):
		return false // a TLS misconfiguration does not heal by retrying
	case errors.As(err, &ue), errors.As(err, &ne):
		return true
	case errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT):
		return true
	}
	return false
}
