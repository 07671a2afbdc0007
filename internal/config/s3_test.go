package config

import (
	"errors"
	"strings"
	"testing"
)

func TestS3Keys(t *testing.T) {
	c := Default()
	env := []string{
		"SLUICE_S3_ENDPOINT=127.0.0.1:7070", "SLUICE_S3_BUCKET=sluice", "SLUICE_S3_PREFIX=c1/",
		"SLUICE_S3_REGION=us-east-1", "SLUICE_S3_ACCESS_KEY=ak", "SLUICE_S3_SECRET_KEY=sk",
		"SLUICE_S3_SESSION_TOKEN=tok", "SLUICE_S3_USE_TLS=true", "SLUICE_S3_ADDRESSING=path",
		"SLUICE_S3_CREATE_BUCKET=true",
	}
	if err := c.LoadEnv(env); err != nil {
		t.Fatal(err)
	}
	want := S3{Endpoint: "127.0.0.1:7070", Bucket: "sluice", Prefix: "c1/", Region: "us-east-1",
		AccessKey: "ak", SecretKey: "sk", SessionToken: "tok", UseTLS: true, Addressing: "path", CreateBucket: true}
	if c.S3 != want {
		t.Fatalf("S3 from env = %+v, want %+v", c.S3, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		key string
		mod func(*S3)
	}{
		{"s3.endpoint", func(s *S3) { s.Endpoint = "" }},
		{"s3.endpoint", func(s *S3) { s.Endpoint = "https://s3.amazonaws.com" }},
		{"s3.endpoint", func(s *S3) { s.Endpoint = "host:9000/bucket" }},
		{"s3.bucket", func(s *S3) { s.Bucket = "" }},
		{"s3.prefix", func(s *S3) { s.Prefix = "/abs" }},
		{"s3.access_key", func(s *S3) { s.AccessKey = "" }},
		{"s3.secret_key", func(s *S3) { s.SecretKey = "" }},
		{"s3.session_token", func(s *S3) { s.AccessKey, s.SecretKey = "", "" }},
		{"s3.addressing", func(s *S3) { s.Addressing = "dns" }},
	}
	for _, tc := range cases {
		c := Default()
		c.S3 = want
		tc.mod(&c.S3)
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.key+":") {
			t.Errorf("%+v: Validate = %v, want an error naming %s", c.S3, err, tc.key)
		}
	}
}
