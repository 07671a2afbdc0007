package sasl

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"
	"time"
)

// OAuthBearer is RFC 7628's mechanism. Tokens are checked as Kafka's
// default validator for it does (OAuthBearerUnsecuredValidatorCallbackHandler):
// an unsecured JWS (header {"alg":"none"}, no signature) whose "sub" claim
// is the user, with an "exp" in the future and an "iat", if any, not in
// it. Anyone can write such a token, so, as in Kafka, it is for
// development: it is never offered unless sasl.mechanisms names it.
const OAuthBearer = "OAUTHBEARER"

// oauthClockSkew is how far "exp" and "iat" may be off (Kafka's
// unsecuredValidatorAllowableClockSkewMs defaults to 0; a little slack
// keeps a token minted on the client's clock usable).
const oauthClockSkew = 5 * time.Second

// oauthInvalidToken is the server's error challenge (RFC 7628 3.2.2).
const oauthInvalidToken = `{"status":"invalid_token"}`

// oauthStep checks the client's initial response; a bad token is
// answered with the error challenge, and the client's %x01 after it ends
// the exchange with that error, as in Kafka.
func (a *Authenticator) oauthStep(s *Session, now func() time.Time) func(context.Context, []byte) ([]byte, bool, error) {
	failed := false
	return func(_ context.Context, msg []byte) ([]byte, bool, error) {
		if failed {
			return nil, false, fmt.Errorf("%w: %s", ErrAuthentication, oauthInvalidToken)
		}
		user, err := parseOAuthBearer(msg, now())
		if err != nil {
			failed = true
			return []byte(oauthInvalidToken), false, nil
		}
		s.user = user
		return []byte{}, true, nil
	}
}

// parseOAuthBearer checks a client initial response (gs2 header, %x01,
// key=value pairs each ended by %x01, a final %x01) and its token, and
// returns the token's subject.
func parseOAuthBearer(msg []byte, now time.Time) (string, error) {
	gs2, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok || !bytes.HasSuffix(rest, []byte{1, 1}) {
		return "", fmt.Errorf("%w: malformed OAUTHBEARER message", ErrAuthentication)
	}
	parts := strings.SplitN(string(gs2), ",", 3)
	if len(parts) != 3 || (parts[0] != "n" && parts[0] != "y") || parts[2] != "" {
		return "", fmt.Errorf("%w: malformed OAUTHBEARER GS2 header", ErrAuthentication)
	}
	authzid, _ := strings.CutPrefix(parts[1], "a=")
	var token string
	for _, kv := range strings.Split(string(rest[:len(rest)-2]), "\x01") {
		k, v, _ := strings.Cut(kv, "=")
		if k == "auth" {
			scheme, t, ok := strings.Cut(v, " ")
			if !ok || !strings.EqualFold(scheme, "Bearer") {
				return "", fmt.Errorf("%w: auth is not a Bearer token", ErrAuthentication)
			}
			token = t
		}
	}
	if token == "" {
		return "", fmt.Errorf("%w: no token", ErrAuthentication)
	}
	sub, err := checkUnsecuredJWS(token, now)
	if err != nil {
		return "", err
	}
	if authzid != "" && authzid != sub {
		return "", fmt.Errorf("%w: authorization id %q differs from the token's subject", ErrAuthentication, authzid)
	}
	return sub, nil
}

// checkUnsecuredJWS validates an unsecured JWS and returns its subject.
func checkUnsecuredJWS(token string, now time.Time) (string, error) {
	bad := func(why string) error { return fmt.Errorf("%w: token: %s", ErrAuthentication, why) }
	segs := strings.Split(token, ".")
	if len(segs) != 3 || segs[2] != "" {
		return "", bad("not an unsecured JWS (header.claims. with no signature)")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeSegment(segs[0], &header); err != nil || header.Alg != "none" {
		return "", bad(`header is not {"alg":"none"}`)
	}
	var claims struct {
		Sub *string  `json:"sub"`
		Exp *float64 `json:"exp"`
		Iat *float64 `json:"iat"`
	}
	if err := decodeSegment(segs[1], &claims); err != nil {
		return "", bad("claims are not a JSON object")
	}
	switch {
	case claims.Sub == nil || *claims.Sub == "":
		return "", bad(`no "sub" claim`)
	case claims.Exp == nil:
		return "", bad(`no "exp" claim`)
	case seconds(*claims.Exp).Add(oauthClockSkew).Before(now):
		return "", bad("expired")
	case claims.Iat != nil && seconds(*claims.Iat).Add(-oauthClockSkew).After(now):
		return "", bad("issued in the future")
	}
	return *claims.Sub, nil
}

func seconds(f float64) time.Time { return time.UnixMilli(int64(f * 1000)) }

func decodeSegment(seg string, v any) error {
	b, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(seg, "="))
	if err != nil {
		return err
	}
	return json.Unmarshal(b, v)
}
