package broker

import (
	"reflect"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/raftq/raftq/transport/kafka"
)

// An itemJudge decides one entry of a request list (a topic, a group, a
// config resource): nil allows it, an error code refuses it.
type itemJudge func(n *Node, c *kafka.Conn, key int16, req kmsg.Request, item reflect.Value) *kerr.Error

// splitItems divides the request list field (the first of lists that req
// has, non-empty) by judge: allowed is req with the allowed entries
// alone, and denied holds, per refusing code, req with that code's
// entries alone. Both are shallow copies; req is untouched. ok is false
// when req has none of the lists or the list is empty.
func splitItems(n *Node, c *kafka.Conn, key int16, req kmsg.Request, lists []string, judge itemJudge) (allowed kmsg.Request, denied map[*kerr.Error]kmsg.Request, nAllowed int, ok bool) {
	q := reflect.ValueOf(req).Elem()
	var field string
	for _, l := range lists {
		if f := q.FieldByName(l); f.IsValid() && f.Kind() == reflect.Slice && f.Len() > 0 {
			field = l
			break
		}
	}
	if field == "" {
		return req, nil, 0, false
	}
	src := q.FieldByName(field)
	keep := reflect.MakeSlice(src.Type(), 0, src.Len())
	refused := map[*kerr.Error]reflect.Value{}
	for i := range src.Len() {
		it := src.Index(i)
		code := judge(n, c, key, req, it)
		if code == nil {
			keep = reflect.Append(keep, it)
			continue
		}
		l, seen := refused[code]
		if !seen {
			l = reflect.MakeSlice(src.Type(), 0, 1)
		}
		refused[code] = reflect.Append(l, it)
	}
	denied = map[*kerr.Error]kmsg.Request{}
	for code, l := range refused {
		denied[code] = withList(req, field, l)
	}
	return withList(req, field, keep), denied, keep.Len(), true
}

// withList is a shallow copy of req with its list field set to l.
func withList(req kmsg.Request, field string, l reflect.Value) kmsg.Request {
	cp := reflect.New(reflect.TypeOf(req).Elem())
	cp.Elem().Set(reflect.ValueOf(req).Elem())
	cp.Elem().FieldByName(field).Set(l)
	return cp.Interface().(kmsg.Request)
}

// deniedResponse answers every denied request with its code (the
// entries only, not a top-level error), appended to resp.
func deniedResponse(resp kmsg.Response, denied map[*kerr.Error]kmsg.Request) kmsg.Response {
	for code, req := range denied {
		errResp, _ := kafka.ErrorResponse(req, code.Code)
		appendLists(resp, errResp)
	}
	return resp
}

// appendLists appends each non-empty list of from to the same list of
// to.
func appendLists(to, from kmsg.Response) {
	t, f := reflect.ValueOf(to).Elem(), reflect.ValueOf(from).Elem()
	for i := range f.NumField() {
		ff := f.Field(i)
		if ff.Kind() != reflect.Slice || ff.Len() == 0 || ff.Type().Elem().Kind() != reflect.Struct {
			continue
		}
		tf := t.Field(i)
		tf.Set(reflect.AppendSlice(tf, ff))
	}
}

// mergedPending is the handler's answer to the allowed part of a
// request with the refused entries' answers appended.
type mergedPending struct {
	p      kafka.Pending
	denied map[*kerr.Error]kmsg.Request
}

func (m *mergedPending) Done() <-chan struct{} { return m.p.Done() }

func (m *mergedPending) Result() (kmsg.Response, error) {
	resp, err := m.p.Result()
	if err != nil || resp == nil {
		return resp, err
	}
	return deniedResponse(resp, m.denied), nil
}

// itemName is an entry's name: the entry itself when it is a string,
// else its Topic, Name, Group or TransactionalID field (string or
// *string), else the name of the topic its TopicID names. "" when none.
func itemName(n *Node, v reflect.Value) string {
	if v.Kind() == reflect.String {
		return v.String()
	}
	if v.Kind() != reflect.Struct {
		return ""
	}
	for _, f := range []string{"Topic", "Name", "Group", "TransactionalID", "ResourceName"} {
		if s := stringField(v, f); s != "" {
			return s
		}
	}
	if f := v.FieldByName("TopicID"); f.IsValid() {
		if id, ok := f.Interface().([16]byte); ok && id != ([16]byte{}) {
			if t, ok := n.meta.View().TopicByID(id); ok {
				return t.Name
			}
		}
	}
	return ""
}

func stringField(v reflect.Value, name string) string {
	f := v.FieldByName(name)
	switch {
	case !f.IsValid():
		return ""
	case f.Kind() == reflect.String:
		return f.String()
	case f.Kind() == reflect.Pointer && !f.IsNil() && f.Elem().Kind() == reflect.String:
		return f.Elem().String()
	}
	return ""
}
