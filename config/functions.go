package config

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/hashicorp/hcl/v2/ext/tryfunc"
	"github.com/zclconf/go-cty/cty"
	"github.com/zclconf/go-cty/cty/convert"
	"github.com/zclconf/go-cty/cty/function"
	"github.com/zclconf/go-cty/cty/function/stdlib"
	ctyjson "github.com/zclconf/go-cty/cty/json"
)

// baseFunctions returns the functions available in wf expressions, under
// the names Terraform users already know. Evaluation layers the guarded
// versions of some of them over this table (budgetFuncs). A fresh map is
// built per call so that no caller can mutate another's table.
func baseFunctions() map[string]function.Function {
	return map[string]function.Function{
		// numbers
		"abs":      stdlib.AbsoluteFunc,
		"ceil":     stdlib.CeilFunc,
		"floor":    stdlib.FloorFunc,
		"log":      stdlib.LogFunc,
		"max":      stdlib.MaxFunc,
		"min":      stdlib.MinFunc,
		"parseint": stdlib.ParseIntFunc,
		"pow":      stdlib.PowFunc,
		"signum":   stdlib.SignumFunc,

		// strings
		"chomp":         stdlib.ChompFunc,
		"endswith":      endsWithFunc,
		"startswith":    startsWithFunc,
		"strcontains":   strContainsFunc,
		"format":        stdlib.FormatFunc,
		"formatlist":    stdlib.FormatListFunc,
		"indent":        stdlib.IndentFunc,
		"join":          stdlib.JoinFunc,
		"lower":         stdlib.LowerFunc,
		"regex":         stdlib.RegexFunc,
		"regexall":      stdlib.RegexAllFunc,
		"regex_replace": stdlib.RegexReplaceFunc,
		"replace":       stdlib.ReplaceFunc,
		"split":         stdlib.SplitFunc,
		"strlen":        stdlib.StrlenFunc,
		"strrev":        stdlib.ReverseFunc,
		"substr":        stdlib.SubstrFunc,
		"title":         stdlib.TitleFunc,
		"trim":          stdlib.TrimFunc,
		"trimprefix":    stdlib.TrimPrefixFunc,
		"trimspace":     stdlib.TrimSpaceFunc,
		"trimsuffix":    stdlib.TrimSuffixFunc,
		"upper":         stdlib.UpperFunc,

		// collections
		"chunklist":       stdlib.ChunklistFunc,
		"coalesce":        coalesceFunc,
		"coalescelist":    stdlib.CoalesceListFunc,
		"compact":         stdlib.CompactFunc,
		"concat":          stdlib.ConcatFunc,
		"contains":        stdlib.ContainsFunc,
		"distinct":        distinctFunc,
		"element":         stdlib.ElementFunc,
		"flatten":         stdlib.FlattenFunc,
		"keys":            stdlib.KeysFunc,
		"length":          lengthFunc,
		"lookup":          stdlib.LookupFunc,
		"merge":           stdlib.MergeFunc,
		"range":           stdlib.RangeFunc,
		"reverse":         stdlib.ReverseListFunc,
		"setintersection": stdlib.SetIntersectionFunc,
		"setproduct":      stdlib.SetProductFunc,
		"setsubtract":     stdlib.SetSubtractFunc,
		"setunion":        stdlib.SetUnionFunc,
		"slice":           stdlib.SliceFunc,
		"sort":            stdlib.SortFunc,
		"values":          stdlib.ValuesFunc,
		"zipmap":          stdlib.ZipmapFunc,

		// encoding
		"base64decode": base64DecodeFunc,
		"base64encode": base64EncodeFunc,
		"csvdecode":    stdlib.CSVDecodeFunc,
		"jsondecode":   stdlib.JSONDecodeFunc,
		"jsonencode":   stdlib.JSONEncodeFunc,
		"sha256":       sha256Func,

		// time
		"formatdate": stdlib.FormatDateFunc,
		"timeadd":    stdlib.TimeAddFunc,

		// conversion
		"tobool":   stdlib.MakeToFunc(cty.Bool),
		"tolist":   linearTo(stdlib.MakeToFunc(cty.List(cty.DynamicPseudoType)), false),
		"tomap":    stdlib.MakeToFunc(cty.Map(cty.DynamicPseudoType)),
		"tonumber": stdlib.MakeToFunc(cty.Number),
		"toset":    linearTo(stdlib.MakeToFunc(cty.Set(cty.DynamicPseudoType)), true),
		"tostring": stdlib.MakeToFunc(cty.String),

		// error handling
		"can": tryfunc.CanFunc,
		"try": tryfunc.TryFunc,
	}
}

// lengthFunc is length() as Terraform has it: collections and strings alike,
// since users write length(var.name) and expect a character count.
var lengthFunc = function.New(&function.Spec{
	Description: "Returns the number of elements of a collection or characters of a string.",
	Params: []function.Parameter{{
		Name:             "value",
		Type:             cty.DynamicPseudoType,
		AllowDynamicType: true,
		AllowUnknown:     true,
	}},
	Type: func(args []cty.Value) (cty.Type, error) {
		ty := args[0].Type()
		switch {
		case ty == cty.String, ty == cty.DynamicPseudoType,
			ty.IsListType(), ty.IsMapType(), ty.IsSetType(), ty.IsTupleType(), ty.IsObjectType():
			return cty.Number, nil
		}
		return cty.NilType, fmt.Errorf("argument must be a string, a collection or a structure")
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		v := args[0]
		if !v.IsKnown() {
			return cty.UnknownVal(cty.Number), nil
		}
		if v.IsNull() {
			return cty.NilVal, fmt.Errorf("argument must not be null")
		}
		switch ty := v.Type(); {
		case ty == cty.String:
			return stdlib.Strlen(v)
		case ty.IsObjectType():
			return cty.NumberIntVal(int64(len(ty.AttributeTypes()))), nil
		default:
			return v.Length(), nil
		}
	},
})

var base64EncodeFunc = function.New(&function.Spec{
	Description: "Encodes a string with standard base64.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		return cty.StringVal(base64.StdEncoding.EncodeToString([]byte(args[0].AsString()))), nil
	},
})

var base64DecodeFunc = function.New(&function.Spec{
	Description: "Decodes a standard base64 string; the result must be UTF-8.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		b, err := base64.StdEncoding.DecodeString(args[0].AsString())
		if err != nil {
			return cty.NilVal, fmt.Errorf("invalid base64: %w", err)
		}
		if !utf8.Valid(b) {
			return cty.NilVal, fmt.Errorf("decoded bytes are not valid UTF-8")
		}
		return cty.StringVal(string(b)), nil
	},
})

var sha256Func = function.New(&function.Spec{
	Description: "Returns the hex SHA-256 of a string.",
	Params:      []function.Parameter{{Name: "str", Type: cty.String}},
	Type:        function.StaticReturnType(cty.String),
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		sum := sha256.Sum256([]byte(args[0].AsString()))
		return cty.StringVal(hex.EncodeToString(sum[:])), nil
	},
})

// coalesceFunc is Terraform's coalesce: the first argument that is neither
// null nor an empty string (cty's stdlib only skips nulls).
var coalesceFunc = function.New(&function.Spec{
	Description: "Returns the first argument that is not null or an empty string.",
	VarParam: &function.Parameter{
		Name:             "vals",
		Type:             cty.DynamicPseudoType,
		AllowNull:        true,
		AllowDynamicType: true,
		AllowUnknown:     true,
	},
	Type: func(args []cty.Value) (cty.Type, error) {
		tys := make([]cty.Type, len(args))
		for i, a := range args {
			tys[i] = a.Type()
		}
		return stdlib.CoalesceFunc.ReturnType(tys)
	},
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		for _, a := range args {
			if !a.IsKnown() {
				return cty.UnknownVal(retType), nil
			}
			if a.IsNull() || (a.Type() == cty.String && a.AsString() == "") {
				continue
			}
			return convert.Convert(a, retType)
		}
		return cty.NilVal, fmt.Errorf("no non-null, non-empty-string arguments")
	},
})

func stringPredicate(desc string, f func(s, sub string) bool) function.Function {
	return function.New(&function.Spec{
		Description: desc,
		Params:      []function.Parameter{{Name: "str", Type: cty.String}, {Name: "substr", Type: cty.String}},
		Type:        function.StaticReturnType(cty.Bool),
		Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
			return cty.BoolVal(f(args[0].AsString(), args[1].AsString())), nil
		},
	})
}

var (
	startsWithFunc  = stringPredicate("Reports whether str begins with substr.", strings.HasPrefix)
	endsWithFunc    = stringPredicate("Reports whether str ends with substr.", strings.HasSuffix)
	strContainsFunc = stringPredicate("Reports whether str contains substr.", strings.Contains)
)

// distinctFunc is distinct in linear time: cty's compares every element
// with every one kept so far, which a list of 100,000 makes hours. Two
// elements of one list are equal exactly when their canonical JSON
// encodings (as the list's element type) are.
var distinctFunc = function.New(&function.Spec{
	Description: stdlib.DistinctFunc.Description(),
	Params:      stdlib.DistinctFunc.Params(),
	Type:        func(args []cty.Value) (cty.Type, error) { return args[0].Type(), nil },
	Impl: func(args []cty.Value, retType cty.Type) (cty.Value, error) {
		list := args[0]
		if !list.IsWhollyKnown() {
			return cty.UnknownVal(retType), nil
		}
		ety := retType.ElementType()
		seen := map[string]bool{}
		var out []cty.Value
		for it := list.ElementIterator(); it.Next(); {
			_, v := it.Element()
			key, err := ctyjson.Marshal(v, ety)
			if err != nil {
				return cty.NilVal, fmt.Errorf("compare elements: %w", err)
			}
			if !seen[string(key)] {
				seen[string(key)] = true
				out = append(out, v)
			}
		}
		if len(out) == 0 {
			return cty.ListValEmpty(ety), nil
		}
		return cty.ListVal(out), nil
	},
})

// linearTo wraps tolist (set false) or toset: cty converts a tuple by
// unifying its element types pair by pair, which takes 1.8 s for 10,000
// strings (toset(activity.list.result) is how a fan-out over an upstream
// list is written). A tuple whose elements are all known to have one type
// (and none is null) is built directly, in n log n; any other value goes
// to cty's conversion, which decides what it means.
func linearTo(slow function.Function, set bool) function.Function {
	return function.New(&function.Spec{
		Description: slow.Description(),
		Params: []function.Parameter{{
			Name: "v", Type: cty.DynamicPseudoType,
			AllowNull: true, AllowUnknown: true, AllowDynamicType: true, AllowMarked: true,
		}},
		Type: func(args []cty.Value) (cty.Type, error) {
			if uniformTuple(args[0]) {
				et := args[0].Type().TupleElementTypes()[0]
				if set {
					return cty.Set(et), nil
				}
				return cty.List(et), nil
			}
			return slow.ReturnTypeForValues(args)
		},
		Impl: func(args []cty.Value, _ cty.Type) (cty.Value, error) {
			v := args[0]
			if !uniformTuple(v) {
				return slow.Call(args)
			}
			elems := v.AsValueSlice()
			if set {
				return cty.SetVal(elems), nil
			}
			return cty.ListVal(elems), nil
		},
	})
}

// uniformTuple reports whether v is a known, unmarked, non-empty tuple
// whose elements all have one known type and none is null.
func uniformTuple(v cty.Value) bool {
	if v.IsMarked() || !v.IsKnown() || v.IsNull() || !v.Type().IsTupleType() {
		return false
	}
	ets := v.Type().TupleElementTypes()
	if len(ets) == 0 || ets[0] == cty.DynamicPseudoType {
		return false
	}
	for _, et := range ets[1:] {
		if !et.Equals(ets[0]) {
			return false
		}
	}
	for _, e := range v.AsValueSlice() {
		// SetVal and ListVal handle marked elements.
		if e, _ = e.Unmark(); e.IsKnown() && e.IsNull() {
			return false
		}
	}
	return true
}
