package rebound

import (
	"net/http"
	"reflect"
	"strconv"
	"strings"

	reboundpb "github.com/rebound-dev/rebound/clients/go/reboundpb"
)

// readSDKFields fills what the outcome still lacks from the exported fields of
// the errors in err's chain, where Go SDKs keep a response's status, headers,
// code and message instead of behind methods:
//   - the Stainless-made SDKs' *Error (openai-go, anthropic-sdk-go): StatusCode,
//     Response (its headers, Retry-After among them), Code, Type and Message;
//   - go-openai's *APIError and *RequestError: HTTPStatusCode, Code (a string
//     or a number: only a string is taken), Type and Message;
//   - google.golang.org/api's *googleapi.Error: Header;
//   - azcore's *ResponseError (the Azure SDK for Go): StatusCode, RawResponse,
//     ErrorCode (BlobNotFound, AuthorizationFailed);
//   - the MCP Go SDK's JSON-RPC errors (*jsonrpc.Error): an integer Code in
//     JSON-RPC's range (-32768 to -32000), as its decimal text (-32602).
//
// openai-go's error says only "OpenAI API error: 429 Too Many Requests", so
// without these a used-up quota (code insufficient_quota) read as a rate
// limit and was retried. Read by their names through reflection, as the
// Python and TypeScript clients read SDK errors by their shape, so that no SDK
// is a dependency. A status outside 100-599 or a field of another type is not
// taken.
func readSDKFields(o *reboundpb.Outcome, err error) {
	for e := err; e != nil; e = unwrapFirst(e) {
		v := structOf(e)
		if !v.IsValid() {
			continue
		}
		if o.HttpStatus == 0 {
			for _, name := range []string{"StatusCode", "HTTPStatusCode"} {
				if s, ok := intField(v, name); ok && s >= 100 && s <= 599 {
					o.HttpStatus = int32(s)
					break
				}
			}
		}
		if len(o.Headers) == 0 {
			for _, name := range []string{"Response", "RawResponse"} {
				if resp, ok := fieldValue(v, name).(*http.Response); ok && resp != nil {
					addHeaders(o, resp.Header)
				}
			}
			// google.golang.org/api's *googleapi.Error keeps them as Header.
			if h, ok := fieldValue(v, "Header").(http.Header); ok {
				addHeaders(o, h)
			}
		}
		for _, name := range []string{"Code", "ErrorCode", "Type"} {
			if o.Code == "" {
				o.Code = stringField(v, name)
			}
		}
		if c, ok := intField(v, "Code"); ok && o.Code == "" && c >= jsonRPCCodes[0] && c <= jsonRPCCodes[1] {
			o.Code = strconv.FormatInt(c, 10)
		}
		// The provider's own words, when the error's text leaves them out (openai-go's does).
		if said := strings.TrimSpace(stringField(v, "Message")); said != "" && !strings.Contains(o.Message, said) {
			o.Message += ": " + said
		}
	}
}

// jsonRPCCodes are the error codes JSON-RPC reserves (MCP's among them: -32602
// invalid params, -32603 internal error); an integer Code outside them is no such code.
var jsonRPCCodes = [2]int64{-32768, -32000}

// unwrapFirst is the next error of err's chain (the first of a joined error's).
func unwrapFirst(err error) error {
	switch u := err.(type) {
	case interface{ Unwrap() error }:
		return u.Unwrap()
	case interface{ Unwrap() []error }:
		if errs := u.Unwrap(); len(errs) > 0 {
			return errs[0]
		}
	}
	return nil
}

// structOf is the struct err is or points to, or the zero Value.
func structOf(err error) reflect.Value {
	v := reflect.ValueOf(err)
	for v.Kind() == reflect.Pointer || v.Kind() == reflect.Interface {
		if v.IsNil() {
			return reflect.Value{}
		}
		v = v.Elem()
	}
	if v.Kind() != reflect.Struct {
		return reflect.Value{}
	}
	return v
}

// field is the exported field name of v (a struct), promoted ones included;
// false when v has none or it sits behind a nil embedded pointer.
func field(v reflect.Value, name string) (reflect.Value, bool) {
	sf, ok := v.Type().FieldByName(name)
	if !ok || !sf.IsExported() {
		return reflect.Value{}, false
	}
	f, err := v.FieldByIndexErr(sf.Index)
	return f, err == nil && f.CanInterface()
}

// fieldValue is the exported field name of v, or nil.
func fieldValue(v reflect.Value, name string) any {
	if f, ok := field(v, name); ok {
		return f.Interface()
	}
	return nil
}

// intField is the exported integer field name of v, if it has one.
func intField(v reflect.Value, name string) (int64, bool) {
	f, ok := field(v, name)
	if !ok {
		return 0, false
	}
	switch f.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return f.Int(), true
	}
	return 0, false
}

// stringField is the exported string field name of v (or an interface field
// holding a string, as go-openai's Code), trimmed; "" otherwise.
func stringField(v reflect.Value, name string) string {
	f, ok := field(v, name)
	if !ok {
		return ""
	}
	if f.Kind() == reflect.Interface && !f.IsNil() {
		f = f.Elem()
	}
	if f.Kind() != reflect.String {
		return ""
	}
	return strings.TrimSpace(f.String())
}

// providerPackages are the import paths of LLM providers' Go SDKs. An error
// from one (a type of the package or below it: openai-go's is in
// github.com/openai/openai-go/v3/internal/apierror) is kind provider_error, as
// the Python and TypeScript clients say of the OpenAI and Anthropic SDKs' errors.
var providerPackages = []string{
	"github.com/openai/openai-go",
	"github.com/anthropics/anthropic-sdk-go",
	"github.com/sashabaranov/go-openai",
}

// fromProviderSDK says whether an error of err's chain has a type of one of providerPackages.
func fromProviderSDK(err error) bool {
	for e := err; e != nil; e = unwrapFirst(e) {
		t := reflect.TypeOf(e)
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if isProviderPackage(t.PkgPath()) {
			return true
		}
	}
	return false
}

// isProviderPackage says whether path is one of providerPackages or below one
// (a major version's /v3 included).
func isProviderPackage(path string) bool {
	for _, p := range providerPackages {
		if path == p || strings.HasPrefix(path, p+"/") {
			return true
		}
	}
	return false
}
