package auth

import (
	"crypto/x509"
	"encoding/asn1"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf16"
)

// rawATV is an attribute of a distinguished name with its value
// undecoded, so that values of unknown types print as their DER.
type rawATV struct {
	Type  asn1.ObjectIdentifier
	Value asn1.RawValue
}

// rdnSET is one relative distinguished name (encoding/asn1 reads a
// slice type named *SET as a SET OF).
type rdnSET []rawATV

// dnKeywords are the attribute keywords Java's X500Principal.getName()
// writes in RFC 2253 form, which Kafka's mapping rules see; any other
// attribute is written as its OID and "#" with the hex of its DER value.
var dnKeywords = map[string]string{
	"2.5.4.3":                    "CN",
	"2.5.4.6":                    "C",
	"2.5.4.7":                    "L",
	"2.5.4.8":                    "ST",
	"2.5.4.10":                   "O",
	"2.5.4.11":                   "OU",
	"2.5.4.9":                    "STREET",
	"0.9.2342.19200300.100.1.25": "DC",
	"0.9.2342.19200300.100.1.1":  "UID",
}

// SubjectDN is cert's subject as Kafka's mapping rules see it: RFC 2253,
// most specific name first, in Java's keywords and escaping.
func SubjectDN(cert *x509.Certificate) (string, error) {
	var seq []rdnSET
	rest, err := asn1.Unmarshal(cert.RawSubject, &seq)
	if err != nil {
		return "", fmt.Errorf("auth: certificate subject: %w", err)
	}
	if len(rest) > 0 {
		return "", fmt.Errorf("auth: certificate subject: %d trailing bytes", len(rest))
	}
	out := make([]string, 0, len(seq))
	for i := len(seq) - 1; i >= 0; i-- {
		avas := make([]string, len(seq[i]))
		for j, a := range seq[i] {
			avas[j] = formatATV(a)
		}
		out = append(out, strings.Join(avas, "+"))
	}
	return strings.Join(out, ","), nil
}

func formatATV(a rawATV) string {
	kw, known := dnKeywords[a.Type.String()]
	if !known {
		return a.Type.String() + "=#" + hex.EncodeToString(a.Value.FullBytes)
	}
	s, ok := directoryString(a.Value)
	if !ok {
		return kw + "=#" + hex.EncodeToString(a.Value.FullBytes)
	}
	return kw + "=" + escapeDNValue(s)
}

// directoryString decodes the string types a DN value may have.
func directoryString(v asn1.RawValue) (string, bool) {
	if v.Class != asn1.ClassUniversal {
		return "", false
	}
	switch v.Tag {
	case asn1.TagUTF8String, asn1.TagPrintableString, asn1.TagIA5String, asn1.TagT61String, 26: // 26: VisibleString
		return string(v.Bytes), true
	case asn1.TagBMPString:
		if len(v.Bytes)%2 != 0 {
			return "", false
		}
		u := make([]uint16, len(v.Bytes)/2)
		for i := range u {
			u[i] = uint16(v.Bytes[2*i])<<8 | uint16(v.Bytes[2*i+1])
		}
		return string(utf16.Decode(u)), true
	}
	return "", false
}

// escapeDNValue escapes as RFC 2253 §2.4: the specials with a backslash,
// and a leading "#" or space and a trailing space.
func escapeDNValue(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		special := strings.IndexByte(`,+"\<>;`, c) >= 0 ||
			i == 0 && (c == '#' || c == ' ') || i == len(s)-1 && c == ' '
		if special {
			b.WriteByte('\\')
		}
		b.WriteByte(c)
	}
	return b.String()
}

// PrincipalFromCert maps cert's subject with p, as Kafka's SSL listener
// names a client.
func (p *PrincipalRules) PrincipalFromCert(cert *x509.Certificate) (string, error) {
	dn, err := SubjectDN(cert)
	if err != nil {
		return "", err
	}
	return p.Name(dn)
}
