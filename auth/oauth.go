package auth

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TokenValidator checks an OAuth 2 bearer token and says whose it is and
// until when it holds.
type TokenValidator interface {
	Validate(token string, now time.Time) (user string, expiry time.Time, err error)
}

// oauthSession is RFC 7628's OAUTHBEARER: one client message, a GS2
// header and key-value pairs separated by 0x01, one of them
// "auth=Bearer <token>".
type oauthSession struct {
	failed
	v      TokenValidator
	now    func() time.Time
	user   string
	expiry time.Time
	done   bool
}

func (s *oauthSession) Step(token []byte) ([]byte, error) {
	if err := s.check(s.done, token); err != nil {
		return nil, err
	}
	authz, bearer, err := parseOAuthMessage(token)
	if err != nil {
		return nil, s.fail(err)
	}
	user, exp, err := s.v.Validate(bearer, s.now())
	if err != nil {
		return nil, s.fail(err)
	}
	if authz != "" && authz != user {
		return nil, s.fail(fmt.Errorf("authorization id %q differs from the token's subject %q", authz, user))
	}
	s.user, s.expiry, s.done = user, exp, true
	return nil, nil
}

// parseOAuthMessage splits "n,[a=authzid],\x01auth=Bearer tok\x01...\x01".
func parseOAuthMessage(msg []byte) (authz, token string, err error) {
	header, rest, ok := bytes.Cut(msg, []byte{1})
	if !ok || !bytes.HasSuffix(rest, []byte{1, 1}) {
		return "", "", errors.New("OAUTHBEARER message not framed by 0x01")
	}
	h := strings.Split(string(header), ",")
	if len(h) != 3 || h[0] != "n" || h[2] != "" {
		return "", "", fmt.Errorf("OAUTHBEARER GS2 header %q", header)
	}
	if h[1] != "" {
		a, ok := strings.CutPrefix(h[1], "a=")
		if !ok || a == "" {
			return "", "", fmt.Errorf("OAUTHBEARER authzid %q", h[1])
		}
		authz = a
	}
	for _, kv := range bytes.Split(rest[:len(rest)-2], []byte{1}) {
		k, v, ok := bytes.Cut(kv, []byte("="))
		if !ok || len(k) == 0 {
			return "", "", errors.New("OAUTHBEARER key-value pair without a key")
		}
		if string(k) == "auth" {
			if token != "" {
				return "", "", errors.New("OAUTHBEARER message with two auth values")
			}
			t, ok := strings.CutPrefix(string(v), "Bearer ")
			if !ok || t == "" {
				return "", "", errors.New("OAUTHBEARER auth value is not a bearer token")
			}
			token = t
		}
	}
	if token == "" {
		return "", "", errors.New("OAUTHBEARER message without a token")
	}
	return authz, token, nil
}

func (s *oauthSession) Done() bool        { return s.done }
func (s *oauthSession) Principal() string { return principal(s.user) }
func (s *oauthSession) Expiry() time.Time { return s.expiry }

// UnsecuredJWS validates unsigned JWS tokens ("alg":"none"), as Kafka's
// default OAuthBearerUnsecuredValidatorCallbackHandler does: for tests
// and trials, never for production, since anyone can mint one.
type UnsecuredJWS struct {
	// PrincipalClaim names the claim holding the user (default "sub").
	PrincipalClaim string
	// RequiredScope, when set, must be in the token's "scope" claim.
	RequiredScope string
	// AllowableClockSkew widens exp and iat checks.
	AllowableClockSkew time.Duration
}

// Validate decodes header.payload. (an empty signature), requires
// alg none, a principal claim, and an exp in the future.
func (u UnsecuredJWS) Validate(token string, now time.Time) (string, time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 || parts[2] != "" {
		return "", time.Time{}, errors.New("unsecured JWS must be header.payload. with no signature")
	}
	var header struct {
		Alg string `json:"alg"`
	}
	if err := decodeJWSPart(parts[0], &header); err != nil || header.Alg != "none" {
		return "", time.Time{}, fmt.Errorf("unsecured JWS header: alg %q, err %v", header.Alg, err)
	}
	var claims map[string]any
	if err := decodeJWSPart(parts[1], &claims); err != nil {
		return "", time.Time{}, fmt.Errorf("unsecured JWS claims: %w", err)
	}
	return u.checkClaims(claims, now)
}

func (u UnsecuredJWS) checkClaims(claims map[string]any, now time.Time) (string, time.Time, error) {
	pc := u.PrincipalClaim
	if pc == "" {
		pc = "sub"
	}
	user, _ := claims[pc].(string)
	if user == "" {
		return "", time.Time{}, fmt.Errorf("token without a %q claim", pc)
	}
	exp, ok := claims["exp"].(float64)
	if !ok {
		return "", time.Time{}, errors.New("token without an exp claim")
	}
	expiry := time.Unix(0, int64(exp*float64(time.Second)))
	if !now.Before(expiry.Add(u.AllowableClockSkew)) {
		return "", time.Time{}, fmt.Errorf("token expired at %s", expiry.UTC().Format(time.RFC3339))
	}
	if iat, ok := claims["iat"].(float64); ok && time.Unix(int64(iat), 0).After(now.Add(u.AllowableClockSkew)) {
		return "", time.Time{}, errors.New("token issued in the future")
	}
	if u.RequiredScope != "" && !hasScope(claims["scope"], u.RequiredScope) {
		return "", time.Time{}, fmt.Errorf("token without scope %q", u.RequiredScope)
	}
	return user, expiry, nil
}

func hasScope(v any, want string) bool {
	switch s := v.(type) {
	case string:
		for _, f := range strings.Fields(s) {
			if f == want {
				return true
			}
		}
	case []any:
		for _, e := range s {
			if e == want {
				return true
			}
		}
	}
	return false
}

func decodeJWSPart(part string, into any) error {
	b, err := base64.RawURLEncoding.DecodeString(part)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}
