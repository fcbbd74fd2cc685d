package kafka

import (
	"bytes"
	"reflect"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// ErrorResponse builds the response to req, at req's version, that reports
// code everywhere the response can: its top-level ErrorCode and, for each
// topic, partition, resource, group or coordinator key that req names, an
// entry with that identity and code (the shape Kafka's per-request
// getErrorResponse produces). It works on any kmsg request by mirroring
// same-named lists of the request into the response.
//
// It reports false when the encoded response would carry code nowhere —
// for example Metadata v0 asking for all topics, whose response has no
// error field at that version — so no clean error can be sent; the server
// then closes the connection.
func ErrorResponse(req kmsg.Request, code int16) (kmsg.Response, bool) {
	resp, ok := buildErrorResponse(req, code)
	if !ok {
		return resp, false
	}
	// A field set in the struct may not exist at this version: the code
	// is on the wire only if it changes the encoding.
	other, _ := buildErrorResponse(req, code^0x5a5a)
	return resp, !bytes.Equal(resp.AppendTo(nil), other.AppendTo(nil))
}

func buildErrorResponse(req kmsg.Request, code int16) (kmsg.Response, bool) {
	resp := req.ResponseKind()
	q, r := reflect.ValueOf(req), reflect.ValueOf(resp)
	if q.Kind() != reflect.Pointer || r.Kind() != reflect.Pointer {
		return resp, false
	}
	return resp, mirror(q.Elem(), r.Elem(), code) > 0
}

// mirror sets r's ErrorCode and fills each list of r from the same-named
// list of q, recursively; it returns how many error codes it set.
func mirror(q, r reflect.Value, code int16) int {
	n := setErrorCode(r, code)
	rt := r.Type()
	for i := range rt.NumField() {
		rf := r.Field(i)
		if rf.Kind() != reflect.Slice || rf.Type().Elem().Kind() != reflect.Struct || !rf.CanSet() {
			continue
		}
		if src := sourceList(q, rt.Field(i).Name); src.IsValid() {
			n += mirrorList(src, rf, code)
		}
	}
	return n
}

func setErrorCode(r reflect.Value, code int16) int {
	f := r.FieldByName("ErrorCode")
	if !f.IsValid() || f.Kind() != reflect.Int16 {
		return 0
	}
	f.SetInt(int64(code))
	return 1
}

// sourceList finds the request list that a response list answers: the
// same name, or the older name a few APIs used for a list of plain names.
func sourceList(q reflect.Value, name string) reflect.Value {
	if q.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	names := []string{name}
	switch name {
	case "Topics":
		names = append(names, "TopicNames") // DeleteTopics before v6
	case "Coordinators":
		names = append(names, "CoordinatorKeys") // FindCoordinator v4+
	}
	for _, n := range names {
		if f := q.FieldByName(n); f.IsValid() && f.Kind() == reflect.Slice && f.Len() > 0 {
			return f
		}
	}
	return reflect.Value{}
}

// mirrorList makes r one entry per entry of src, each with kmsg defaults,
// src's identity and the error code.
func mirrorList(src, r reflect.Value, code int16) int {
	out := reflect.MakeSlice(r.Type(), src.Len(), src.Len())
	n := 0
	for i := range src.Len() {
		e := out.Index(i)
		if d, ok := e.Addr().Interface().(interface{ Default() }); ok {
			d.Default()
		}
		s := src.Index(i)
		if s.Kind() == reflect.Struct {
			copyIdentity(s, e)
			n += mirror(s, e, code)
		} else {
			setNameIdentity(s, e)
			n += setErrorCode(e, code)
		}
	}
	r.Set(out)
	return n
}

// identityFields names the fields that identify an entry in both a request
// and its response. Only these are copied; everything else keeps its
// kmsg default.
var identityFields = [...]string{
	"Topic", "TopicID", "Name", "Partition", "Group", "Key",
	"ResourceType", "ResourceName", "MemberID", "GroupInstanceID",
	"TransactionalID", "ProducerID",
}

func copyIdentity(s, e reflect.Value) {
	for _, name := range identityFields {
		sf, ef := s.FieldByName(name), e.FieldByName(name)
		if sf.IsValid() && ef.IsValid() && ef.CanSet() {
			assign(ef, sf)
		}
	}
}

// setNameIdentity stores a plain name (DeleteTopics' TopicNames,
// DescribeGroups' Groups, FindCoordinator's keys) in the first identity
// field of e that can hold it.
func setNameIdentity(s, e reflect.Value) {
	for _, name := range identityFields {
		if ef := e.FieldByName(name); ef.IsValid() && ef.CanSet() && assign(ef, s) {
			return
		}
	}
}

// assign sets dst from src when their types match, bridging string and
// *string; it reports whether it did.
func assign(dst, src reflect.Value) bool {
	switch {
	case src.Type() == dst.Type():
		dst.Set(src)
	case src.Kind() == reflect.String && dst.Type() == reflect.PointerTo(src.Type()):
		p := reflect.New(src.Type())
		p.Elem().Set(src)
		dst.Set(p)
	case src.Kind() == reflect.Pointer && src.Type().Elem() == dst.Type() && dst.Kind() == reflect.String:
		if !src.IsNil() {
			dst.Set(src.Elem())
		}
	default:
		return false
	}
	return true
}
