package auth

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// PrincipalRules maps the subject of a TLS client certificate, in
// RFC 2253 form (see SubjectDN), to a principal name, as Kafka's
// ssl.principal.mapping.rules (KIP-371): the first rule that applies
// names the principal.
type PrincipalRules struct {
	rules []principalRule
}

// principalRule is DEFAULT (the whole DN) or RULE:pattern/replacement/[LU].
type principalRule struct {
	isDefault   bool
	pattern     string         // as written, for String
	re          *regexp.Regexp // ^(?:pattern)$
	replacement []replacePart
	rawRepl     string
	lower       bool
	upper       bool
}

// replacePart is a literal, or a group reference when group >= 0.
type replacePart struct {
	literal string
	group   int
}

// ErrNoPrincipalRule is returned when no rule applies to a DN; Kafka
// refuses such a client.
var ErrNoPrincipalRule = errors.New("auth: no principal mapping rule applies")

// DefaultPrincipalRules is Kafka's default: the whole DN.
const DefaultPrincipalRules = "DEFAULT"

// ParsePrincipalRules parses comma-separated rules in Kafka's syntax:
// DEFAULT, or RULE:pattern/replacement/ optionally followed by L or U
// (lower or upper case the result). Inside pattern and replacement a
// backslash escapes the next character, so "\/" is a slash and commas
// need no escape; the replacement refers to groups as $1, $2 (a
// reference to a group the pattern lacks is literal, as in Kafka).
// Empty entries are ignored; no rule at all means DEFAULT. Patterns are
// Go regular expressions (RE2), which lack Java's lookarounds and
// backreferences; such a pattern is refused here.
func ParsePrincipalRules(s string) (*PrincipalRules, error) {
	var out PrincipalRules
	rest := strings.TrimSpace(s)
	for rest != "" {
		rest = strings.TrimLeft(rest, " \t\n\r\f")
		if strings.HasPrefix(rest, ",") {
			rest = rest[1:]
			continue
		}
		r, tail, err := parseRule(rest)
		if err != nil {
			return nil, err
		}
		out.rules = append(out.rules, r)
		rest = tail
	}
	if len(out.rules) == 0 {
		out.rules = []principalRule{{isDefault: true}}
	}
	return &out, nil
}

// parseRule reads one rule from the start of s and returns what follows
// its separating comma.
func parseRule(s string) (principalRule, string, error) {
	if tail, ok := endOfRule(strings.TrimPrefix(s, "DEFAULT")); ok && strings.HasPrefix(s, "DEFAULT") {
		return principalRule{isDefault: true}, tail, nil
	}
	if !strings.HasPrefix(s, "RULE:") {
		return principalRule{}, "", fmt.Errorf("auth: invalid principal mapping rule %q: want DEFAULT or RULE:pattern/replacement/[LU]", firstEntry(s))
	}
	pattern, rest, ok1 := scanEscaped(s[len("RULE:"):])
	repl, rest, ok2 := scanEscaped(rest)
	if !ok1 || !ok2 {
		return principalRule{}, "", fmt.Errorf("auth: invalid principal mapping rule %q: want RULE:pattern/replacement/[LU]", firstEntry(s))
	}
	r := principalRule{pattern: pattern, rawRepl: repl}
	if rest != "" && (rest[0] == 'L' || rest[0] == 'U') {
		r.lower, r.upper = rest[0] == 'L', rest[0] == 'U'
		rest = rest[1:]
	}
	tail, ok := endOfRule(rest)
	if !ok {
		return principalRule{}, "", fmt.Errorf("auth: invalid principal mapping rule %q: unexpected %q after it", firstEntry(s), firstEntry(rest))
	}
	if err := r.compile(); err != nil {
		return principalRule{}, "", err
	}
	return r, tail, nil
}

// endOfRule accepts optional whitespace and then a comma or the end.
func endOfRule(s string) (string, bool) {
	t := strings.TrimLeft(s, " \t\n\r\f")
	switch {
	case t == "":
		return "", true
	case t[0] == ',':
		return t[1:], true
	}
	return "", false
}

// scanEscaped reads up to the first slash not escaped by a backslash;
// escapes are kept, for the regexp or the replacement to interpret.
func scanEscaped(s string) (field, rest string, ok bool) {
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '\\':
			if i+1 == len(s) {
				return "", "", false
			}
			i++
		case '/':
			return s[:i], s[i+1:], true
		}
	}
	return "", "", false
}

func firstEntry(s string) string {
	if i := strings.IndexByte(s, ','); i >= 0 {
		return s[:i]
	}
	return s
}

func (r *principalRule) compile() error {
	re, err := regexp.Compile("^(?:" + r.pattern + ")$")
	if err != nil {
		return fmt.Errorf("auth: principal mapping rule pattern %q: %w", r.pattern, err)
	}
	r.re = re
	r.replacement, err = parseReplacement(r.rawRepl, re.NumSubexp())
	return err
}

// parseReplacement reads Java's replacement syntax as Kafka uses it:
// "\c" is c; "$" and digits refer to the longest group number the
// pattern has (a first digit above its groups leaves "$n" literal).
func parseReplacement(s string, groups int) ([]replacePart, error) {
	var parts []replacePart
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			parts = append(parts, replacePart{literal: lit.String(), group: -1})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\':
			i++ // scanEscaped guarantees a next character
			lit.WriteByte(s[i])
		case c == '$' && i+1 < len(s) && isDigit(s[i+1]) && int(s[i+1]-'0') <= groups:
			n, j := int(s[i+1]-'0'), i+2
			for j < len(s) && isDigit(s[j]) && n*10+int(s[j]-'0') <= groups {
				n, j = n*10+int(s[j]-'0'), j+1
			}
			flush()
			parts = append(parts, replacePart{group: n})
			i = j - 1
		case c == '$' && (i+1 == len(s) || !isDigit(s[i+1])):
			return nil, fmt.Errorf("auth: principal mapping replacement %q: illegal group reference at %d", s, i)
		default:
			lit.WriteByte(c)
		}
	}
	flush()
	return parts, nil
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Name maps dn with the first rule that applies.
func (p *PrincipalRules) Name(dn string) (string, error) {
	for _, r := range p.rules {
		if name, ok := r.apply(dn); ok {
			return name, nil
		}
	}
	return "", fmt.Errorf("%w to %q (rules %s)", ErrNoPrincipalRule, dn, p)
}

func (r *principalRule) apply(dn string) (string, bool) {
	if r.isDefault {
		return dn, true
	}
	m := r.re.FindStringSubmatchIndex(dn)
	if m == nil {
		return "", false
	}
	var b strings.Builder
	for _, part := range r.replacement {
		if part.group < 0 {
			b.WriteString(part.literal)
		} else if m[2*part.group] >= 0 {
			b.WriteString(dn[m[2*part.group]:m[2*part.group+1]])
		}
	}
	out := b.String()
	switch {
	case r.lower:
		out = strings.ToLower(out)
	case r.upper:
		out = strings.ToUpper(out)
	}
	return out, true
}

// String lists the rules as Kafka's SslPrincipalMapper prints them.
func (p *PrincipalRules) String() string {
	s := make([]string, len(p.rules))
	for i, r := range p.rules {
		s[i] = r.String()
	}
	return "[" + strings.Join(s, ", ") + "]"
}

func (r principalRule) String() string {
	if r.isDefault {
		return "DEFAULT"
	}
	s := "RULE:" + r.pattern + "/" + r.rawRepl
	switch {
	case r.lower:
		s += "/L"
	case r.upper:
		s += "/U"
	}
	return s
}
