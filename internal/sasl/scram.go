package sasl

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	"crypto/sha256"
	"crypto/sha512"

	"github.com/sluice-mq/sluice/internal/scram"
)

// scramStep runs the RFC 5802 server conversation: client-first, answered
// with the server-first message, then client-final, answered with the
// server's signature.
//
// It is written here rather than taken from a library for one Kafka rule:
// librdkafka before 2.6.1 sends the client nonce twice in client-final
// (its nonce, then the server's combined one), and Kafka accepts a
// client-final nonce that ends with the combined nonce (KAFKA-17636's
// fix for CVE-2024-56128 kept that). A library that insists on equality
// (xdg-go/scram, tried first) refuses every such client.
func (a *Authenticator) scramStep(s *Session, m int8) func(context.Context, []byte) ([]byte, bool, error) {
	h := sha256.New
	if m == scram.SHA512 {
		h = sha512.New
	}
	var (
		first      bool = true
		gs2, bare  string
		serverMsg  string
		nonce      string
		cred       scram.Credential
		user, azid string
	)
	return func(ctx context.Context, msg []byte) ([]byte, bool, error) {
		in := string(msg)
		if first {
			first = false
			var cnonce string
			var err error
			if gs2, azid, bare, user, cnonce, err = parseClientFirst(in); err != nil {
				return nil, false, err
			}
			if azid != "" && azid != user {
				return nil, false, fmt.Errorf("%w: authorization id %q differs from the user", ErrAuthentication, azid)
			}
			cred, err = a.creds.Credential(ctx, user, m)
			if errors.Is(err, scram.ErrStorage) {
				return nil, false, fmt.Errorf("%w: %v", ErrAuthentication, err)
			}
			if err != nil {
				return nil, false, failure(s.mech) // unknown user, as a bad proof
			}
			var r [24]byte
			rand.Read(r[:])
			nonce = cnonce + base64.RawStdEncoding.EncodeToString(r[:])
			serverMsg = "r=" + nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(int(cred.Iterations))
			return []byte(serverMsg), false, nil
		}
		i := strings.LastIndex(in, ",p=")
		if i < 0 {
			return nil, false, fmt.Errorf("%w: client-final-message has no proof", ErrAuthentication)
		}
		withoutProof := in[:i]
		proof, err := base64.StdEncoding.DecodeString(in[i+3:])
		if err != nil {
			return nil, false, fmt.Errorf("%w: client proof is not base64", ErrAuthentication)
		}
		attrs := strings.Split(withoutProof, ",")
		if len(attrs) < 2 || attrs[0] != "c="+base64.StdEncoding.EncodeToString([]byte(gs2)) {
			return nil, false, fmt.Errorf("%w: channel binding does not match the GS2 header", ErrAuthentication)
		}
		r, ok := strings.CutPrefix(attrs[1], "r=")
		if !ok || !strings.HasSuffix(r, nonce) {
			return nil, false, fmt.Errorf("%w: nonce does not match the server's", ErrAuthentication)
		}
		authMsg := []byte(bare + "," + serverMsg + "," + withoutProof)
		clientSig := hmacOf(h, cred.StoredKey, authMsg)
		if len(proof) != len(clientSig) {
			return nil, false, failure(s.mech)
		}
		clientKey := make([]byte, len(proof))
		for j := range proof {
			clientKey[j] = proof[j] ^ clientSig[j]
		}
		sum := h()
		sum.Write(clientKey)
		if !hmac.Equal(sum.Sum(nil), cred.StoredKey) {
			return nil, false, failure(s.mech)
		}
		s.user = user
		return []byte("v=" + base64.StdEncoding.EncodeToString(hmacOf(h, cred.ServerKey, authMsg))), true, nil
	}
}

func hmacOf(h func() hash.Hash, key, msg []byte) []byte {
	m := hmac.New(h, key)
	m.Write(msg)
	return m.Sum(nil)
}

// parseClientFirst splits a client-first-message: the GS2 header (which
// client-final echoes base64-encoded), the authorization id, the bare
// message (part of what the proof signs), the user and the client nonce.
// Channel binding (p=) and mandatory extensions (m=) are refused;
// optional extensions (Kafka's tokenauth) are ignored.
func parseClientFirst(in string) (gs2, authzid, bare, user, cnonce string, err error) {
	bad := func(what string) error { return fmt.Errorf("%w: client-first-message: %s", ErrAuthentication, what) }
	parts := strings.SplitN(in, ",", 3)
	if len(parts) != 3 {
		return "", "", "", "", "", bad("no GS2 header")
	}
	switch parts[0] {
	case "n", "y":
	default:
		return "", "", "", "", "", bad("channel binding is not supported")
	}
	if parts[1] != "" {
		az, ok := strings.CutPrefix(parts[1], "a=")
		if !ok {
			return "", "", "", "", "", bad("malformed authorization id")
		}
		if authzid, ok = unescapeName(az); !ok {
			return "", "", "", "", "", bad("malformed authorization id")
		}
	}
	gs2 = parts[0] + "," + parts[1] + ","
	bare = parts[2]
	attrs := strings.Split(bare, ",")
	if len(attrs) < 2 || strings.HasPrefix(attrs[0], "m=") {
		return "", "", "", "", "", bad("expected n= and r=")
	}
	name, ok := strings.CutPrefix(attrs[0], "n=")
	if !ok {
		return "", "", "", "", "", bad("expected n=")
	}
	if user, ok = unescapeName(name); !ok || user == "" {
		return "", "", "", "", "", bad("malformed user name")
	}
	if cnonce, ok = strings.CutPrefix(attrs[1], "r="); !ok || cnonce == "" {
		return "", "", "", "", "", bad("expected r=")
	}
	return gs2, authzid, bare, user, cnonce, nil
}

// unescapeName undoes RFC 5802's saslname escaping (=2C is ',', =3D is
// '='); any other '=' makes the name invalid.
func unescapeName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}
