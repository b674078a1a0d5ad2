package dynamofence_test

import (
	"bytes"
	"errors"
	"strconv"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb/types"

	"github.com/fencelock/fencelock/fence"
	"github.com/fencelock/fencelock/internal/testkit/benchkit"
	"github.com/fencelock/fencelock/internal/testkit/fencewant"
)

// BenchmarkPut compares, on one server and in one run, a fenced Put (a
// conditional UpdateItem) with the store's plain put, a PutItem of the same
// value. They run in turn within each iteration, in alternating order.
// Goal: fenced/plain ≤ 1.15. A third write, the Put's UpdateItem without
// its condition, tells the condition's cost (fenced/set) from that of an
// UpdateItem's expression. The server is the tests' (minidyn, in the test
// process), so the figures are the SDK's and the emulator's cost, not
// DynamoDB's.
func BenchmarkPut(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	c := client(b)
	s := mustNew(b, c)
	kPlain, kFenced := fencewant.Prefix(b)+"plain", fencewant.Prefix(b)+"fenced"
	plain := func() error {
		_, err := c.PutItem(b.Context(), &dynamodb.PutItemInput{TableName: aws.String(storeTable), Item: map[string]types.AttributeValue{
			"key": &types.AttributeValueMemberS{Value: kPlain}, "value": &types.AttributeValueMemberB{Value: value},
		}})
		return err
	}
	kSet := fencewant.Prefix(b) + "set"
	set := func() error { // the Put's UpdateItem without its condition
		_, err := c.UpdateItem(b.Context(), &dynamodb.UpdateItemInput{
			TableName: aws.String(storeTable), Key: map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: kSet}},
			UpdateExpression:          aws.String("SET #v = :v, #t = :t"),
			ExpressionAttributeNames:  map[string]string{"#v": "value", "#t": "token"},
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": &types.AttributeValueMemberB{Value: value}, ":t": num(7)},
		})
		return err
	}
	fenced := func() error { return s.Put(b.Context(), kFenced, 7, value) }
	d := benchkit.Interleave(b, plain, fenced, set)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "fenced-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "fenced/plain")
	b.ReportMetric(float64(d[1])/float64(d[2]), "fenced/set")
}

// BenchmarkUpdate compares a fenced read-modify-write (Store.Update, by a
// holder whose token is the floor already) with the plain one it
// replaces: a consistent GetItem, then a PutItem conditional on the
// version read. Goal: update/plain ≤ 1.25.
func BenchmarkUpdate(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	modify := func(old []byte) []byte { v := bytes.Clone(old); v[0]++; return v }
	c := client(b)
	s := mustNew(b, c)
	kPlain, kFenced := fencewant.Prefix(b)+"plain", fencewant.Prefix(b)+"fenced"
	key := map[string]types.AttributeValue{"key": &types.AttributeValueMemberS{Value: kPlain}}
	if _, err := c.PutItem(b.Context(), &dynamodb.PutItemInput{TableName: aws.String(storeTable), Item: map[string]types.AttributeValue{
		"key": key["key"], "value": &types.AttributeValueMemberB{Value: value}, "version": num(0),
	}}); err != nil {
		b.Fatal(err)
	}
	fencewant.Put(b, s, kFenced, 7, string(value))
	plain := func() error {
		out, err := c.GetItem(b.Context(), &dynamodb.GetItemInput{TableName: aws.String(storeTable), Key: key, ConsistentRead: aws.Bool(true)})
		if err != nil {
			return err
		}
		ver, _ := strconv.Atoi(out.Item["version"].(*types.AttributeValueMemberN).Value)
		_, err = c.PutItem(b.Context(), &dynamodb.PutItemInput{
			TableName: aws.String(storeTable),
			Item: map[string]types.AttributeValue{
				"key": key["key"], "value": &types.AttributeValueMemberB{Value: modify(out.Item["value"].(*types.AttributeValueMemberB).Value)},
				"version": num(ver + 1),
			},
			ConditionExpression:       aws.String("version = :v"),
			ExpressionAttributeValues: map[string]types.AttributeValue{":v": num(ver)},
		})
		var cf *types.ConditionalCheckFailedException
		if errors.As(err, &cf) {
			return errors.New("plain conditional put refused")
		}
		return err
	}
	update := func() error {
		return s.Update(b.Context(), kFenced, 7, func(old fence.Record) ([]byte, error) { return modify(old.Value), nil })
	}
	d := benchkit.Interleave(b, plain, update)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "plain-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "update/plain")
}

func num(n int) types.AttributeValue { return &types.AttributeValueMemberN{Value: strconv.Itoa(n)} }

// BenchmarkUpdateAll compares, on one server and in one run, a transfer
// between two items written with one UpdateAll (its two claims sent at
// once, then one TransactWriteItems) with the same Store's Update of one
// item. The two run in turn within each iteration. Goal (issue 47):
// updateall/update ≤ 1.3.
func BenchmarkUpdateAll(b *testing.B) {
	value := bytes.Repeat([]byte("x"), 1024)
	modify := func(old []byte) []byte { v := bytes.Clone(old); v[0]++; return v }
	s := mustNew(b, client(b))
	p := fencewant.Prefix(b)
	one, ka, kb := p+"one", p+"a", p+"b"
	for _, k := range []string{one, ka, kb} {
		fencewant.Put(b, s, k, 7, string(value))
	}
	claims := []fence.Claim{{Resource: ka, Token: 7}, {Resource: kb, Token: 7}}
	update := func() error {
		return s.Update(b.Context(), one, 7, func(old fence.Record) ([]byte, error) { return modify(old.Value), nil })
	}
	updateAll := func() error {
		return s.UpdateAll(b.Context(), claims, func(old map[string]fence.Record) (map[string][]byte, error) {
			return map[string][]byte{ka: modify(old[ka].Value), kb: modify(old[kb].Value)}, nil
		})
	}
	d := benchkit.Interleave(b, update, updateAll)
	n := float64(b.N)
	b.ReportMetric(float64(d[0].Nanoseconds())/n, "update-ns/op")
	b.ReportMetric(float64(d[1].Nanoseconds())/n, "updateall-ns/op")
	b.ReportMetric(float64(d[1])/float64(d[0]), "updateall/update")
}
