// Package auth is raftq's server side of SASL: the mechanisms a Kafka
// client may authenticate with (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512 and
// OAUTHBEARER) and the SCRAM credentials they check. It knows nothing of
// connections or Kafka frames; transport/kafka carries the tokens
// (SaslHandshake, SaslAuthenticate) and the metadata group stores the
// credentials.
//
// The package also holds Kafka's ACL model (acl*.go): ACL bindings,
// ACLFilters for describe and delete, and the Authorizer that decides an
// Action against a set of ACLs. The ACLs themselves live in the metadata
// group; the broker asks the Authorizer per request.
//
// # Sessions
//
// NewSession starts one authentication with one mechanism. Step takes
// each client token and returns the server's answer; once Done, Principal
// names who authenticated ("User:<name>", Kafka's principal form). A
// session fails once and for good: after an error every Step returns
// ErrAuthFailed again, so a client cannot retry inside one session.
//
// # Invariants
//
//   - Passwords are never stored. A Credential holds what RFC 5802 §3
//     calls the server's stored values: salt, iteration count, StoredKey
//     and ServerKey, from which no password can be recovered without a
//     dictionary attack costing Iterations HMACs per guess.
//   - PLAIN checks a password against the user's SCRAM credential (as
//     Redpanda does): it derives StoredKey from the password and the
//     stored salt and iterations and compares in constant time. There is
//     no second password store to drift from the first.
//   - Whether a user exists is not revealed by answers or timing: an
//     unknown user gets a decoy credential (salt and keys derived from the
//     Lookup's secret decoy key and the name, so the same name always sees
//     the same salt) of the shape most real credentials have (salt length,
//     iterations and, for PLAIN, hash: Lookup.Shape, CommonShape), and the
//     conversation runs to the end, failing at the proof exactly as a
//     wrong password does, after the same work. Every failure the client
//     sees is the one ErrAuthFailed.
//   - SCRAM's server side is RFC 5802's, with one leniency of Kafka's:
//     the client-final nonce must end with the server's, not equal it,
//     because librdkafka sends its own nonce before the whole server
//     nonce. xdg-go/scram derives the credentials; its server is not
//     used, as it refuses that.
//   - Tokens over MaxTokenBytes are refused before parsing.
//   - Every parser here is fuzzed (FuzzSessions): no input panics, and no
//     input authenticates without the credential's password.
//
// # Authorization
//
//   - Decisions are Kafka's StandardAuthorizer's: super users pass; a
//     resource no ACL covers is decided by AllowEveryoneIfNoACLFound; a
//     matching DENY beats any ALLOW; ALLOW READ, WRITE, DELETE and ALTER
//     imply DESCRIBE, ALLOW ALTER_CONFIGS implies DESCRIBE_CONFIGS, and a
//     DENY implies nothing. "User:*" matches every principal (of any
//     type, as Kafka's), host "*" every host, LITERAL "*" every name of the resource type.
//   - An ACL that ACL.Check refuses is never stored; the resource types
//     are TOPIC, GROUP, CLUSTER (named kafka-cluster) and TRANSACTIONAL_ID.
//   - The Authorizer decides over an ACLIndex, which gives exactly the
//     ACLs whose pattern covers the action's resource (its literal name,
//     the wildcard, each prefix of the name that some PREFIXED pattern
//     holds), so a decision costs the same among ten ACLs or 100,000.
//     The index is immutable; a change of ACLs builds a new one.
//
// # Certificate principals
//
// PrincipalRules are Kafka's ssl.principal.mapping.rules (KIP-371): they
// map a TLS client certificate's subject to a principal name. Invariants:
//
//   - The subject is seen as Kafka sees it (SubjectDN): RFC 2253, most
//     specific attribute first, Java's keywords (CN, C, L, ST, O, OU,
//     STREET, DC, UID) and everything else as OID=#hex of its DER value,
//     so rules written for Kafka match the same certificates here.
//   - The first rule that fully matches the DN names the principal; no
//     match is an error (ErrNoPrincipalRule) and the client is refused.
//     DEFAULT, and an empty rule list, give the whole DN.
//   - Rule syntax follows Kafka's parser (escapes, commas inside
//     patterns, an invalid rule refused whole). Patterns are RE2: Java
//     lookarounds and backreferences are refused when parsed, and a
//     pattern is matched once against the whole DN (Java's replaceAll
//     would add the replacement again when the pattern also matches the
//     empty string at the end).
package auth
