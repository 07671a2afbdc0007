// Package s3 is the cluster-mode objstore.Storage: objects in a bucket of
// any S3-compatible service (AWS S3, MinIO, versitygw, Ceph RGW, R2, ...),
// spoken to with minio-go.
//
// It owns the mapping from sluice keys to object names (Config.Prefix +
// key), ranged reads, paginated sorted listing, and the translation of S3
// and network failures into errors the log engine can act on: a missing
// key wraps objstore.ErrNotFound, and every failure that may go away by
// itself (connection refused or reset, timeouts, 5xx, throttling) wraps
// ErrUnavailable, so IsRetriable tells "try again" from "this will never
// work" (bad credentials, missing bucket, invalid key).
//
// It does not own durability or replication: a Put is durable when the
// service acknowledges the PUT, and how many copies that means is the
// service's promise. It keeps no local state and no cache; the log engine's
// block cache sits above it. It does not read the environment: credentials
// come in Config, which internal/config fills.
//
// Objects are written with one PUT, or with a multipart upload when larger
// than Config.PartSize (minio-go does the parts). Both are atomic on S3: a
// reader sees the old object or the new one. A multipart upload that fails
// (source error, short source, cancelled context) is aborted; one cut off by
// a crash, or whose abort cannot reach the service, is left for the bucket's
// AbortIncompleteMultipartUpload lifecycle rule (docs/backends.md).
//
// There are no locks beyond the closed flag; minio-go's client is safe for
// concurrent use.
package s3
