package auth

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"errors"
	"math/big"
	"testing"
	"time"
)

// The cases below mirror Kafka's SslPrincipalMapperTest.

func TestParsePrincipalRules_Valid(t *testing.T) {
	for _, s := range []string{
		"DEFAULT",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
		"RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
		"RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
		"RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
	} {
		if _, err := ParsePrincipalRules(s); err != nil {
			t.Errorf("%q: %v", s, err)
		}
	}
}

func TestParsePrincipalRules_Invalid(t *testing.T) {
	for _, s := range []string{
		"default",
		"DEFAUL",
		"DEFAULT/L",
		"DEFAULT/U",
		"RULE:CN=(.*?),OU=ServiceUsers.*/$1",
		"rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
		"RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
		// Beyond Kafka's cases: what RE2 or the replacement refuse.
		"RULE:^CN=(?=x).*$/$1/",
		"RULE:^CN=(.*)$/$x/",
		"RULE:^CN=(.*)$/$/",
		`RULE:^CN=(.*)$\`,
	} {
		if r, err := ParsePrincipalRules(s); err == nil {
			t.Errorf("%q parsed as %s", s, r)
		}
	}
}

func TestPrincipalRules_Name(t *testing.T) {
	r, err := ParsePrincipalRules("RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, " +
		"RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L, " +
		"RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U, " +
		"RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U, " +
		"DEFAULT")
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=Duke,OU=ServiceUsers,O=Org,C=US":        "duke",
		"CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US": "duke@sme",
		"cn=duke,ou=sme,dc=mycp,dc=com":             "DUKE@SME",
		"cN=duke,OU=JavaSoft,O=Sun Microsystems":    "DUKE",
		"OU=JavaSoft,O=Sun Microsystems,C=US":       "OU=JavaSoft,O=Sun Microsystems,C=US",
	} {
		if got, err := r.Name(dn); err != nil || got != want {
			t.Errorf("Name(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
}

func TestPrincipalRules_String(t *testing.T) {
	for in, want := range map[string]string{
		// Kafka keeps no rule at all for these, refusing every
		// certificate; raftq falls back to DEFAULT.
		"":                        "[DEFAULT]",
		",   , , ,      , , ,   ": "[DEFAULT]",

		"DEFAULT":                                    "[DEFAULT]",
		"RULE://":                                    "[RULE:/]",
		"RULE:/.*/":                                  "[RULE:/.*]",
		"RULE:/.*/L":                                 "[RULE:/.*/L]",
		"RULE://,DEFAULT":                            "[RULE:/, DEFAULT]",
		"  RULE:// ,  DEFAULT  ":                     "[RULE:/, DEFAULT]",
		"  RULE:   /     / ,  DEFAULT  ":             "[RULE:   /     , DEFAULT]",
		"  RULE:  /     /U   ,DEFAULT  ":             "[RULE:  /     /U, DEFAULT]",
		",,RULE://,,,DEFAULT,,":                      "[RULE:/, DEFAULT]",
		",  , RULE: /   /    ,,,   DEFAULT, ,   ":    "[RULE: /   , DEFAULT]",
		"     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,": "[RULE:   /  /U, DEFAULT]",
		"  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  ": "[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]",
		`RULE:\/\\\(\)\n\t/\/\//`:                                "[RULE:\\/\\\\\\(\\)\\n\\t/\\/\\/]",
		`RULE:\**\/+/*/L,RULE:\/*\**/**/`:                        `[RULE:\**\/+/*/L, RULE:\/*\**/**]`,
		`RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT`: `[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]`,
	} {
		r, err := ParsePrincipalRules(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got := r.String(); got != want {
			t.Errorf("%q: rules %s, want %s", in, got, want)
		}
	}
}

func TestPrincipalRules_CommaWithWhitespace(t *testing.T) {
	r, err := ParsePrincipalRules(`RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := r.Name(`CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz`); err != nil || got != `Tkac\, Adam` {
		t.Errorf("got %q, %v", got, err)
	}
}

// TestPrincipalRules_NoRuleApplies: without DEFAULT a DN no rule matches
// is refused, as in Kafka; a reference to a group the pattern lacks is
// literal.
func TestPrincipalRules_NoRuleApplies(t *testing.T) {
	r, err := ParsePrincipalRules("RULE:^CN=([a-z]+)$/$1-$2/")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := r.Name("CN=Duke,O=x"); !errors.Is(err, ErrNoPrincipalRule) {
		t.Errorf("unmatched DN: %v, want ErrNoPrincipalRule", err)
	}
	if got, err := r.Name("CN=duke"); err != nil || got != "duke-$2" {
		t.Errorf("got %q, %v; want duke-$2", got, err)
	}
}

// TestSubjectDN: RFC 2253 as Java's X500Principal.getName(): most
// specific first, Java's keywords (DC and UID, not Go's SERIALNUMBER),
// escaped specials, other attributes as OID=#hex.
func TestSubjectDN(t *testing.T) {
	oid := func(s ...int) asn1.ObjectIdentifier { return asn1.ObjectIdentifier(s) }
	name := pkix.Name{
		Country: []string{"US"}, Organization: []string{"Sun, Inc."}, OrganizationalUnit: []string{"Java+Soft"},
		CommonName: " Duke#", SerialNumber: "42",
		ExtraNames: []pkix.AttributeTypeAndValue{
			{Type: oid(0, 9, 2342, 19200300, 100, 1, 25), Value: "com"},
			{Type: oid(2, 5, 4, 6), Value: "US"},
			{Type: oid(2, 5, 4, 10), Value: "Sun, Inc."},
			{Type: oid(2, 5, 4, 11), Value: "Java+Soft"},
			{Type: oid(0, 9, 2342, 19200300, 100, 1, 1), Value: "duke"},
			{Type: oid(2, 5, 4, 5), Value: "42"},
			{Type: oid(2, 5, 4, 3), Value: " Duke# "},
		},
	}
	got, err := SubjectDN(selfSigned(t, name))
	if err != nil {
		t.Fatal(err)
	}
	want := `CN=\ Duke#\ ,2.5.4.5=#13023432,UID=duke,OU=Java\+Soft,O=Sun\, Inc.,C=US,DC=com`
	if got != want {
		t.Errorf("SubjectDN = %s\n want %s", got, want)
	}
	r, _ := ParsePrincipalRules("")
	if p, err := r.PrincipalFromCert(selfSigned(t, pkix.Name{CommonName: "alice", Organization: []string{"raftq"}})); err != nil || p != "CN=alice,O=raftq" {
		t.Errorf("DEFAULT principal %q, %v", p, err)
	}
}

func selfSigned(t *testing.T, subject pkix.Name) *x509.Certificate {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: subject, NotBefore: time.Now(), NotAfter: time.Now().Add(time.Hour)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return cert
}
