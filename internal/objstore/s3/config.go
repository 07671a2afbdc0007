package s3

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/minio/minio-go/v7/pkg/s3utils"

	"github.com/sluice-mq/sluice/internal/objstore"
)

// Addressing is how requests name the bucket.
type Addressing string

const (
	// AddressingAuto lets minio-go choose: virtual-host style for the
	// endpoints known to support it (AWS S3, Google Cloud Storage, Aliyun
	// OSS), path style for everything else.
	AddressingAuto Addressing = "auto"
	// AddressingPath puts the bucket in the path: http://host/bucket/key.
	// MinIO, versitygw, Ceph and most self-hosted services want this.
	AddressingPath Addressing = "path"
	// AddressingVirtualHost puts the bucket in the host name:
	// http://bucket.host/key. The bucket's DNS name must resolve.
	AddressingVirtualHost Addressing = "virtual-host"
)

// Defaults for the zero values of Config's tuning fields.
const (
	DefaultDialTimeout           = 5 * time.Second
	DefaultResponseHeaderTimeout = 30 * time.Second
	DefaultMaxRetries            = 3
	DefaultPartSize              = 16 << 20 // minio-go's own default
	minPartSize                  = 5 << 20  // the S3 limit for every part but the last
	maxPartSize                  = 5 << 30
)

// ErrInvalidConfig is wrapped by every error Validate returns.
var ErrInvalidConfig = errors.New("s3: invalid config")

// Config describes one bucket (and a prefix inside it). Key names in errors
// are those of the s3 section of sluice's configuration file.
type Config struct {
	// Endpoint is host or host:port, without a scheme: "s3.amazonaws.com",
	// "minio.internal:9000", "127.0.0.1:7070".
	Endpoint string
	// Bucket holds sluice's objects.
	Bucket string
	// Prefix is prepended to every key, so several clusters (or tests) can
	// share a bucket. A trailing "/" is added when missing.
	Prefix string
	// Region is the bucket's region. Empty asks the service (one
	// GetBucketLocation request, cached); set it for AWS to save that
	// request, and for services that do not answer it.
	Region string
	// AccessKey and SecretKey sign requests (SigV4); both empty means
	// anonymous requests. SessionToken is for temporary credentials.
	AccessKey    string
	SecretKey    string
	SessionToken string
	// UseTLS selects https.
	UseTLS bool
	// Addressing: "auto" (the default when empty), "path" or "virtual-host".
	Addressing Addressing
	// CreateBucket creates the bucket in New when it does not exist;
	// otherwise a missing bucket fails New with ErrNoBucket.
	CreateBucket bool

	// DialTimeout bounds connecting to the endpoint (default 5s), and
	// ResponseHeaderTimeout the wait for a response once a request is sent
	// (default 30s): a hung service then fails as ErrUnavailable instead
	// of blocking a flush forever. Callers bound whole operations with
	// their context.
	DialTimeout           time.Duration
	ResponseHeaderTimeout time.Duration
	// MaxRetries is how many times one request is attempted (default 3;
	// 1 disables retrying), with minio-go's jittered backoff of 200ms
	// doubling up to 1s. Kept small because the log engine retries whole
	// operations itself and must see an outage quickly. Bodies that are
	// not seekable (io.Reader sources of Put under PartSize) are sent once.
	MaxRetries int
	// PartSize is the multipart threshold and part size (default 16 MiB,
	// at least 5 MiB). Put buffers one part in memory for sources that
	// are not io.ReaderAt.
	PartSize int64

	// Transport replaces the HTTP transport (custom TLS roots, proxies,
	// tests); DialTimeout and ResponseHeaderTimeout then do not apply.
	Transport http.RoundTripper
}

// DefaultConfig returns a Config with every tuning field set; Endpoint and
// Bucket must still be filled in.
func DefaultConfig() Config {
	return Config{
		Addressing:            AddressingAuto,
		DialTimeout:           DefaultDialTimeout,
		ResponseHeaderTimeout: DefaultResponseHeaderTimeout,
		MaxRetries:            DefaultMaxRetries,
		PartSize:              DefaultPartSize,
	}
}

// withDefaults fills zero tuning fields and normalizes Prefix.
func (c Config) withDefaults() Config {
	if c.Addressing == "" {
		c.Addressing = AddressingAuto
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = DefaultDialTimeout
	}
	if c.ResponseHeaderTimeout == 0 {
		c.ResponseHeaderTimeout = DefaultResponseHeaderTimeout
	}
	if c.MaxRetries == 0 {
		c.MaxRetries = DefaultMaxRetries
	}
	if c.PartSize == 0 {
		c.PartSize = DefaultPartSize
	}
	if c.Prefix != "" && !strings.HasSuffix(c.Prefix, "/") {
		c.Prefix += "/"
	}
	return c
}

// Validate reports the first bad field, naming its configuration key.
// Zero tuning fields are valid (they mean the defaults).
func (c Config) Validate() error {
	bad := func(key, format string, args ...any) error {
		return fmt.Errorf("%w: s3.%s: %s", ErrInvalidConfig, key, fmt.Sprintf(format, args...))
	}
	if err := validateEndpoint(c.Endpoint); err != nil {
		return bad("endpoint", "%v", err)
	}
	if c.Bucket == "" {
		return bad("bucket", "must be set")
	}
	if err := s3utils.CheckValidBucketNameStrict(c.Bucket); err != nil {
		return bad("bucket", "%q: %v", c.Bucket, err)
	}
	if c.Prefix != "" {
		if err := validateKey(strings.TrimSuffix(c.Prefix, "/")); err != nil {
			return bad("prefix", "%q: %v", c.Prefix, err)
		}
		if len(c.Prefix) > objstore.MaxKeyLen/2 {
			return bad("prefix", "%q is longer than %d bytes", c.Prefix, objstore.MaxKeyLen/2)
		}
	}
	switch {
	case c.AccessKey == "" && c.SecretKey != "":
		return bad("access_key", "must be set when secret_key is")
	case c.AccessKey != "" && c.SecretKey == "":
		return bad("secret_key", "must be set when access_key is")
	case c.SessionToken != "" && c.AccessKey == "":
		return bad("session_token", "needs access_key and secret_key")
	}
	switch c.Addressing {
	case "", AddressingAuto, AddressingPath, AddressingVirtualHost:
	default:
		return bad("addressing", "%q: want %q, %q or %q", c.Addressing, AddressingAuto, AddressingPath, AddressingVirtualHost)
	}
	switch {
	case c.DialTimeout < 0:
		return bad("dial_timeout", "must be >= 0")
	case c.ResponseHeaderTimeout < 0:
		return bad("response_header_timeout", "must be >= 0")
	case c.MaxRetries < 0:
		return bad("max_retries", "must be >= 0")
	case c.PartSize != 0 && (c.PartSize < minPartSize || c.PartSize > maxPartSize):
		return bad("part_size", "%d: must be between 5 MiB and 5 GiB", c.PartSize)
	}
	return nil
}

func validateEndpoint(ep string) error {
	if ep == "" {
		return errors.New("must be set (host or host:port)")
	}
	if strings.Contains(ep, "://") {
		return fmt.Errorf("%q: give host:port without a scheme (use_tls selects https)", ep)
	}
	if strings.ContainsAny(ep, "/?# ") {
		return fmt.Errorf("%q: want host or host:port, no path", ep)
	}
	host := ep
	if h, port, err := net.SplitHostPort(ep); err == nil {
		n, perr := strconv.Atoi(port)
		if perr != nil || n < 1 || n > 65535 {
			return fmt.Errorf("%q: bad port %q", ep, port)
		}
		host = h
	}
	if host == "" {
		return fmt.Errorf("%q: empty host", ep)
	}
	return nil
}
