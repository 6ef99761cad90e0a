//! `@ethersproject/abi` `defaultAbiCoder`: ethers' human-readable parameter parser,
//! its coders (encode with ethers' value coercion and errors; decode into frozen
//! Result arrays with named keys, small integers as numbers, lazily-thrown errors).

use boa_engine::object::FunctionObjectBuilder;
use boa_engine::property::PropertyDescriptor;
use boa_engine::{
    Context, JsError, JsObject, JsResult, JsString, JsValue, NativeFunction, js_string,
};
use num_bigint::BigInt;
use num_traits::{One, Signed, ToPrimitive, Zero};

use super::address;
use super::bignumber;
use super::bytes;
use super::err::{
    self, BUFFER_OVERRUN, INVALID_ARGUMENT, MISSING_ARGUMENT, P, UNEXPECTED_ARGUMENT, V_ABI,
};
use super::js;
use super::strings;

// ---------------------------------------------------------------- ParamType

#[derive(Clone, Debug)]
pub(crate) struct ParamType {
    pub(crate) name: Option<String>,
    pub(crate) ty: String,
    pub(crate) indexed: Option<bool>,
    pub(crate) components: Option<Vec<ParamType>>,
    array_length: Option<i64>,
    array_children: Option<Box<ParamType>>,
    base_type: String,
}

fn jq(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_else(|_| format!("\"{s}\""))
}

impl ParamType {
    /// `ParamType.fromObject({name, type, indexed, components})`.
    fn from_parts(
        name: Option<String>,
        ty: &str,
        indexed: Option<bool>,
        components: Option<Vec<ParamType>>,
    ) -> ParamType {
        let ty = verify_type(ty);
        let name = name.filter(|n| !n.is_empty());
        let (array_length, array_children, base_type) = match split_array(&ty) {
            Some((child, len)) => {
                let child = ParamType::from_parts(None, child, None, components.clone());
                (Some(len), Some(Box::new(child)), "array".to_owned())
            }
            None => {
                let bt = if components.is_some() {
                    "tuple".to_owned()
                } else {
                    ty.clone()
                };
                (None, None, bt)
            }
        };
        ParamType {
            name,
            ty,
            indexed,
            components,
            array_length,
            array_children,
            base_type,
        }
    }

    /// `JSON.stringify(paramType)`.
    fn to_json(&self) -> String {
        let opt = |s: &Option<String>| s.as_ref().map_or("null".to_owned(), |s| jq(s));
        let comps = match &self.components {
            Some(c) => format!(
                "[{}]",
                c.iter()
                    .map(ParamType::to_json)
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            None => "null".to_owned(),
        };
        format!(
            "{{\"name\":{},\"type\":{},\"indexed\":{},\"components\":{},\"arrayLength\":{},\"arrayChildren\":{},\"baseType\":{},\"_isParamType\":true}}",
            opt(&self.name),
            jq(&self.ty),
            self.indexed.map_or("null".to_owned(), |b| b.to_string()),
            comps,
            self.array_length
                .map_or("null".to_owned(), |l| l.to_string()),
            self.array_children
                .as_ref()
                .map_or("null".to_owned(), |c| c.to_json()),
            jq(&self.base_type),
        )
    }
}

/// `/^(.*)\[([0-9]*)\]$/` → (child type, length or -1).
fn split_array(ty: &str) -> Option<(&str, i64)> {
    if !ty.ends_with(']') {
        return None;
    }
    let open = ty.rfind('[')?;
    let digits = &ty[open + 1..ty.len() - 1];
    if !digits.bytes().all(|c| c.is_ascii_digit()) {
        return None;
    }
    let len = if digits.is_empty() {
        -1
    } else {
        digits.parse::<i64>().unwrap_or(i64::MAX)
    };
    Some((&ty[..open], len))
}

pub(crate) fn verify_type(ty: &str) -> String {
    let after = |p: &str| -> Option<String> {
        let rest = ty.strip_prefix(p)?;
        match rest.chars().next() {
            None => Some(String::new()),
            Some(c) if !('1'..='9').contains(&c) => Some(rest.to_owned()),
            _ => None,
        }
    };
    if let Some(rest) = after("uint") {
        return format!("uint256{rest}");
    }
    if let Some(rest) = after("int") {
        return format!("int256{rest}");
    }
    ty.to_owned()
}

#[derive(Default, Clone, Copy)]
struct State {
    allow_type: bool,
    allow_name: bool,
    allow_params: bool,
    allow_array: bool,
    read_array: bool,
}

struct Node {
    ty: String,
    name: String,
    indexed: Option<bool>,
    components: Option<Vec<usize>>,
    parent: Option<usize>,
    state: State,
}

fn check_modifier(ctx: &mut Context, ty: &str, name: &str) -> JsResult<bool> {
    let bytes_mod = matches!(name, "calldata" | "memory" | "storage");
    let nest_mod = matches!(name, "calldata" | "memory");
    if ty == "bytes" || ty == "string" {
        if bytes_mod {
            return Ok(true);
        }
    } else if ty == "address" {
        if name == "payable" {
            return Ok(true);
        }
    } else if (ty.contains('[') || ty == "tuple") && nest_mod {
        return Ok(true);
    }
    if bytes_mod || name == "payable" {
        return Err(err::arg(
            ctx,
            V_ABI,
            "invalid modifier",
            "name",
            P::str(name),
        ));
    }
    Ok(false)
}

/// ethers' `parseParamType` state machine; `indexed` is accepted only with `allow_indexed`
/// (event parameters).
pub(crate) fn parse_param_type(
    ctx: &mut Context,
    original: &str,
    allow_indexed: bool,
) -> JsResult<ParamType> {
    let param: String = original
        .chars()
        .map(|c| if c.is_whitespace() { ' ' } else { c })
        .collect();
    let units: Vec<u16> = param.encode_utf16().collect();
    let throw_at = |ctx: &mut Context, i: usize| {
        err::arg(
            ctx,
            V_ABI,
            &format!("unexpected character at position {i}"),
            "param",
            P::str(&param),
        )
    };
    let new_node = |parent: Option<usize>| Node {
        ty: String::new(),
        name: String::new(),
        indexed: allow_indexed.then_some(false),
        components: None,
        parent,
        state: State {
            allow_type: true,
            ..State::default()
        },
    };
    // The root node has no `indexed` until the keyword is seen.
    let mut nodes: Vec<Node> = vec![Node {
        indexed: None,
        ..new_node(None)
    }];
    let mut node = 0usize;
    for (i, &u) in units.iter().enumerate() {
        let c = char::from_u32(u32::from(u)).unwrap_or('\u{fffd}');
        match c {
            '(' => {
                if nodes[node].state.allow_type && nodes[node].ty.is_empty() {
                    nodes[node].ty = "tuple".to_owned();
                } else if !nodes[node].state.allow_params {
                    return Err(throw_at(ctx, i));
                }
                nodes[node].state.allow_type = false;
                nodes[node].ty = verify_type(&nodes[node].ty);
                let child = nodes.len();
                nodes.push(new_node(Some(node)));
                nodes[node].components = Some(vec![child]);
                node = child;
            }
            ')' => {
                if nodes[node].name == "indexed" {
                    if !allow_indexed {
                        return Err(throw_at(ctx, i));
                    }
                    nodes[node].indexed = Some(true);
                    nodes[node].name.clear();
                }
                if check_modifier(ctx, &nodes[node].ty.clone(), &nodes[node].name.clone())? {
                    nodes[node].name.clear();
                }
                nodes[node].ty = verify_type(&nodes[node].ty);
                let Some(parent) = nodes[node].parent else {
                    return Err(throw_at(ctx, i));
                };
                node = parent;
                let st = &mut nodes[node].state;
                st.allow_params = false;
                st.allow_name = true;
                st.allow_array = true;
            }
            ',' => {
                if nodes[node].name == "indexed" {
                    if !allow_indexed {
                        return Err(throw_at(ctx, i));
                    }
                    nodes[node].indexed = Some(true);
                    nodes[node].name.clear();
                }
                if check_modifier(ctx, &nodes[node].ty.clone(), &nodes[node].name.clone())? {
                    nodes[node].name.clear();
                }
                nodes[node].ty = verify_type(&nodes[node].ty);
                let Some(parent) = nodes[node].parent else {
                    return Err(err::type_error(
                        "Cannot read properties of undefined (reading 'components')",
                    ));
                };
                let sibling = nodes.len();
                nodes.push(new_node(Some(parent)));
                if let Some(c) = nodes[parent].components.as_mut() {
                    c.push(sibling);
                }
                node = sibling;
            }
            ' ' => {
                if nodes[node].state.allow_type && !nodes[node].ty.is_empty() {
                    nodes[node].ty = verify_type(&nodes[node].ty);
                    let st = &mut nodes[node].state;
                    st.allow_type = false;
                    st.allow_name = true;
                    st.allow_params = true;
                }
                if nodes[node].state.allow_name && !nodes[node].name.is_empty() {
                    if nodes[node].name == "indexed" {
                        if !allow_indexed || nodes[node].indexed == Some(true) {
                            return Err(throw_at(ctx, i));
                        }
                        nodes[node].indexed = Some(true);
                        nodes[node].name.clear();
                    } else if check_modifier(
                        ctx,
                        &nodes[node].ty.clone(),
                        &nodes[node].name.clone(),
                    )? {
                        nodes[node].name.clear();
                    } else {
                        nodes[node].state.allow_name = false;
                    }
                }
            }
            '[' => {
                if !nodes[node].state.allow_array {
                    return Err(throw_at(ctx, i));
                }
                nodes[node].ty.push(c);
                let st = &mut nodes[node].state;
                st.allow_array = false;
                st.allow_name = false;
                st.read_array = true;
            }
            ']' => {
                if !nodes[node].state.read_array {
                    return Err(throw_at(ctx, i));
                }
                nodes[node].ty.push(c);
                let st = &mut nodes[node].state;
                st.read_array = false;
                st.allow_array = true;
                st.allow_name = true;
            }
            _ => {
                let st = nodes[node].state;
                if st.allow_type {
                    nodes[node].ty.push(c);
                    nodes[node].state.allow_params = true;
                    nodes[node].state.allow_array = true;
                } else if st.allow_name {
                    nodes[node].name.push(c);
                    nodes[node].state.allow_array = false;
                } else if st.read_array {
                    nodes[node].ty.push(c);
                } else {
                    return Err(throw_at(ctx, i));
                }
            }
        }
    }
    if nodes[node].parent.is_some() {
        return Err(err::arg(
            ctx,
            V_ABI,
            "unexpected eof",
            "param",
            P::str(&param),
        ));
    }
    if nodes[node].name == "indexed" {
        if !allow_indexed || nodes[node].indexed == Some(true) {
            let pos = original.encode_utf16().count().saturating_sub(7);
            return Err(throw_at(ctx, pos));
        }
        nodes[node].indexed = Some(true);
        nodes[node].name.clear();
    } else if check_modifier(ctx, &nodes[node].ty.clone(), &nodes[node].name.clone())? {
        nodes[node].name.clear();
    }
    nodes[node].ty = verify_type(&nodes[node].ty);
    Ok(typify(&nodes, node))
}

fn typify(nodes: &[Node], i: usize) -> ParamType {
    let n = &nodes[i];
    let comps = n
        .components
        .as_ref()
        .map(|c| c.iter().map(|j| typify(nodes, *j)).collect());
    ParamType::from_parts(Some(n.name.clone()), &n.ty, n.indexed, comps)
}

/// `ParamType.from(value)` for a string or a `{type, name, components}` object.
fn param_from(ctx: &mut Context, v: &JsValue) -> JsResult<ParamType> {
    if let Some(s) = js::as_str(v) {
        return parse_param_type(ctx, &s, false);
    }
    if js::is_nullish(v) {
        return Err(err::type_error(
            "Cannot read properties of undefined (reading 'name')",
        ));
    }
    let name = js::get(ctx, v, "name")?;
    let name = if name.to_boolean() {
        Some(name.to_string(ctx)?.to_std_string_lossy())
    } else {
        None
    };
    let ty = js::get(ctx, v, "type")?;
    let Some(ty) = js::as_str(&ty) else {
        return Err(err::type_error("type.match is not a function"));
    };
    let indexed = js::get(ctx, v, "indexed")?;
    let indexed = if js::is_nullish(&indexed) {
        None
    } else {
        Some(indexed.to_boolean())
    };
    let comps = js::get(ctx, v, "components")?;
    let comps = if comps.to_boolean() {
        let mut out = Vec::new();
        for c in js::array_items(ctx, &comps)? {
            out.push(param_from(ctx, &c)?);
        }
        Some(out)
    } else {
        None
    };
    Ok(ParamType::from_parts(name, &ty, indexed, comps))
}

// ---------------------------------------------------------------- coders

#[derive(Clone, Debug)]
enum Kind {
    Address,
    Bool,
    Str,
    Bytes,
    Null,
    Number { size: usize, signed: bool },
    Fixed(usize),
    Array { child: Box<Coder>, length: i64 },
    Tuple(Vec<Coder>),
}

#[derive(Clone, Debug)]
struct Coder {
    kind: Kind,
    /// `undefined` (anonymous array element) is `None` with `anonymous`.
    local_name: Option<String>,
    anonymous: bool,
}

impl Coder {
    fn name(&self) -> String {
        match &self.kind {
            Kind::Address => "address".into(),
            Kind::Bool => "bool".into(),
            Kind::Str => "string".into(),
            Kind::Bytes => "bytes".into(),
            Kind::Null => "null".into(),
            Kind::Number { size, signed } => {
                format!("{}{}", if *signed { "int" } else { "uint" }, size * 8)
            }
            Kind::Fixed(n) => format!("bytes{n}"),
            Kind::Array { .. } => "array".into(),
            Kind::Tuple(_) => "tuple".into(),
        }
    }

    fn ty(&self) -> String {
        match &self.kind {
            Kind::Null => String::new(),
            Kind::Array { child, length } => {
                let l = if *length >= 0 {
                    length.to_string()
                } else {
                    String::new()
                };
                format!("{}[{l}]", child.ty())
            }
            Kind::Tuple(cs) => format!(
                "tuple({})",
                cs.iter().map(Coder::ty).collect::<Vec<_>>().join(",")
            ),
            _ => self.name(),
        }
    }

    fn dynamic(&self) -> bool {
        match &self.kind {
            Kind::Str | Kind::Bytes => true,
            Kind::Array { child, length } => *length == -1 || child.dynamic(),
            Kind::Tuple(cs) => cs.iter().any(Coder::dynamic),
            _ => false,
        }
    }

    fn local_name_js(&self) -> JsValue {
        match (&self.local_name, self.anonymous) {
            (_, true) => JsValue::undefined(),
            (Some(n), _) => js::s(n),
            (None, _) => JsValue::null(),
        }
    }

    /// `JSON.stringify(coder)`.
    fn to_json(&self) -> String {
        let mut out = format!(
            "{{\"name\":{},\"type\":{}",
            jq(&self.name()),
            jq(&self.ty())
        );
        if !self.anonymous {
            out.push_str(&format!(
                ",\"localName\":{}",
                self.local_name
                    .as_ref()
                    .map_or("null".to_owned(), |n| jq(n))
            ));
        }
        out.push_str(&format!(",\"dynamic\":{}", self.dynamic()));
        match &self.kind {
            Kind::Number { size, signed } => {
                out.push_str(&format!(",\"size\":{size},\"signed\":{signed}"))
            }
            Kind::Fixed(n) => out.push_str(&format!(",\"size\":{n}")),
            Kind::Array { child, length } => out.push_str(&format!(
                ",\"coder\":{},\"length\":{length}",
                child.to_json()
            )),
            Kind::Tuple(cs) => out.push_str(&format!(
                ",\"coders\":[{}]",
                cs.iter().map(Coder::to_json).collect::<Vec<_>>().join(",")
            )),
            _ => {}
        }
        out.push('}');
        out
    }

    fn throw(&self, ctx: &mut Context, message: &str, value: &JsValue) -> JsError {
        err::make(
            ctx,
            V_ABI,
            message,
            INVALID_ARGUMENT,
            vec![
                ("argument", P::Js(self.local_name_js())),
                ("value", P::Js(value.clone())),
            ],
        )
    }
}

fn parse_digits(d: &str) -> Option<u64> {
    // parseInt of a digit string ("" is NaN).
    if d.is_empty() {
        return None;
    }
    Some(d.parse::<u64>().unwrap_or(u64::MAX))
}

/// `AbiCoder._getCoder(param)`.
fn get_coder(ctx: &mut Context, p: &ParamType) -> JsResult<Coder> {
    let local_name = p.name.clone();
    let mk = |kind| Coder {
        kind,
        local_name: local_name.clone(),
        anonymous: false,
    };
    match p.base_type.as_str() {
        "address" => return Ok(mk(Kind::Address)),
        "bool" => return Ok(mk(Kind::Bool)),
        "string" => return Ok(mk(Kind::Str)),
        "bytes" => return Ok(mk(Kind::Bytes)),
        "array" => {
            let child = match &p.array_children {
                Some(c) => get_coder(ctx, c)?,
                None => return Err(err::type_error("invalid array type")),
            };
            return Ok(mk(Kind::Array {
                child: Box::new(child),
                length: p.array_length.unwrap_or(-1),
            }));
        }
        "tuple" => {
            let mut cs = Vec::new();
            for c in p.components.iter().flatten() {
                cs.push(get_coder(ctx, c)?);
            }
            return Ok(mk(Kind::Tuple(cs)));
        }
        "" => return Ok(mk(Kind::Null)),
        _ => {}
    }
    let t = p.ty.as_str();
    let num = t
        .strip_prefix("uint")
        .map(|d| (false, d))
        .or_else(|| t.strip_prefix("int").map(|d| (true, d)));
    if let Some((signed, d)) = num
        && d.bytes().all(|c| c.is_ascii_digit())
    {
        let size = if d.is_empty() {
            Some(256)
        } else {
            parse_digits(d)
        };
        return match size {
            Some(s) if s != 0 && s <= 256 && s % 8 == 0 => Ok(mk(Kind::Number {
                size: (s / 8) as usize,
                signed,
            })),
            _ => Err(err::arg(
                ctx,
                V_ABI,
                &format!("invalid {} bit length", if signed { "int" } else { "uint" }),
                "param",
                P::Json(p.to_json()),
            )),
        };
    }
    if let Some(d) = t.strip_prefix("bytes")
        && d.bytes().all(|c| c.is_ascii_digit())
    {
        return match parse_digits(d) {
            Some(s) if s != 0 && s <= 32 => Ok(mk(Kind::Fixed(s as usize))),
            _ => Err(err::arg(
                ctx,
                V_ABI,
                "invalid bytes length",
                "param",
                P::Json(p.to_json()),
            )),
        };
    }
    Err(err::arg(ctx, V_ABI, "invalid type", "type", P::str(t)))
}

// ---------------------------------------------------------------- encode

fn word(v: &BigInt) -> [u8; 32] {
    // Two's complement over 256 bits of a value known to fit.
    let t = if v.is_negative() {
        (BigInt::one() << 256) + v
    } else {
        v.clone()
    };
    let (_, b) = t.to_bytes_be();
    let mut out = [0u8; 32];
    let n = b.len().min(32);
    out[32 - n..].copy_from_slice(&b[b.len() - n..]);
    out
}

fn word_usize(n: usize) -> [u8; 32] {
    word(&BigInt::from(n))
}

fn pad_right(out: &mut Vec<u8>, data: &[u8]) {
    out.extend_from_slice(data);
    let rem = data.len() % 32;
    if rem != 0 {
        out.extend(std::iter::repeat_n(0u8, 32 - rem));
    }
}

fn encode_value(
    ctx: &mut Context,
    coder: &Coder,
    value: &JsValue,
    out: &mut Vec<u8>,
) -> JsResult<()> {
    match &coder.kind {
        Kind::Number { size, signed } => {
            let v = bignumber::to_big(ctx, value)?;
            let bits = (*size * 8) as u64;
            let ok = if *signed {
                let bound: BigInt = (BigInt::one() << (bits - 1)) - 1;
                {
                    let min: BigInt = -(bound.clone() + BigInt::one());
                    !(v > bound || v < min)
                }
            } else {
                !(v.is_negative() || v > (BigInt::one() << bits) - 1)
            };
            if !ok {
                return Err(coder.throw(ctx, "value out-of-bounds", value));
            }
            out.extend_from_slice(&word(&v));
        }
        Kind::Address => {
            let a = match address::get_address(ctx, value) {
                Ok(a) => a,
                Err(e) => {
                    let msg = error_message(ctx, &e);
                    return Err(coder.throw(ctx, &msg, value));
                }
            };
            let mut w = [0u8; 32];
            w[12..].copy_from_slice(&bytes::decode_hex_digits(&a[2..]));
            out.extend_from_slice(&w);
        }
        Kind::Bool => {
            out.extend_from_slice(&word_usize(usize::from(value.to_boolean())));
        }
        Kind::Bytes => {
            let b = bytes::arrayify(ctx, value)?;
            out.extend_from_slice(&word_usize(b.len()));
            pad_right(out, &b);
        }
        Kind::Str => {
            let b = strings::to_utf8_bytes(ctx, value, &JsValue::undefined())?;
            out.extend_from_slice(&word_usize(b.len()));
            pad_right(out, &b);
        }
        Kind::Fixed(n) => {
            let b = bytes::arrayify(ctx, value)?;
            if b.len() != *n {
                return Err(coder.throw(ctx, "incorrect data length", value));
            }
            pad_right(out, &b);
        }
        Kind::Null => {
            if !js::is_nullish(value) {
                return Err(coder.throw(ctx, "not null", value));
            }
        }
        Kind::Array { child, length } => {
            if !js::is_array(value) {
                return Err(coder.throw(ctx, "expected array value", value));
            }
            let items = js::array_items(ctx, value)?;
            let count = if *length == -1 {
                out.extend_from_slice(&word_usize(items.len()));
                items.len() as i64
            } else {
                *length
            };
            let label = match &coder.local_name {
                Some(n) if !coder.anonymous => format!("coder array {n}"),
                _ => "coder array".to_owned(),
            };
            let n = items.len() as i64;
            if n != count {
                let (msg, code) = if n < count {
                    (format!("missing argument: {label}"), MISSING_ARGUMENT)
                } else {
                    (format!("too many arguments: {label}"), UNEXPECTED_ARGUMENT)
                };
                return Err(err::make(
                    ctx,
                    V_ABI,
                    &msg,
                    code,
                    vec![
                        ("count", P::num(n as f64)),
                        ("expectedCount", P::num(count as f64)),
                    ],
                ));
            }
            let coders = vec![(**child).clone(); items.len()];
            pack_values(ctx, &coders, &items, out)?;
        }
        Kind::Tuple(coders) => pack(ctx, coders, value, out)?,
    }
    Ok(())
}

fn error_message(ctx: &mut Context, e: &JsError) -> String {
    match e.try_native(ctx) {
        Ok(n) => n.message().to_owned(),
        Err(_) => e.to_string(),
    }
}

/// `pack(writer, coders, values)` (values: an array or an object keyed by names).
fn pack(ctx: &mut Context, coders: &[Coder], values: &JsValue, out: &mut Vec<u8>) -> JsResult<()> {
    let items = if js::is_array(values) {
        js::array_items(ctx, values)?
    } else if values.to_boolean() && values.as_object().is_some() {
        let mut seen: Vec<String> = Vec::new();
        let mut items = Vec::with_capacity(coders.len());
        for c in coders {
            let name = match &c.local_name {
                Some(n) if !n.is_empty() && !c.anonymous => n.clone(),
                _ => {
                    return Err(err::make(
                        ctx,
                        V_ABI,
                        "cannot encode object for signature with missing names",
                        INVALID_ARGUMENT,
                        vec![
                            ("argument", P::str("values")),
                            ("coder", P::Json(c.to_json())),
                            ("value", P::Js(values.clone())),
                        ],
                    ));
                }
            };
            if seen.contains(&name) {
                return Err(err::make(
                    ctx,
                    V_ABI,
                    "cannot encode object for signature with duplicate names",
                    INVALID_ARGUMENT,
                    vec![
                        ("argument", P::str("values")),
                        ("coder", P::Json(c.to_json())),
                        ("value", P::Js(values.clone())),
                    ],
                ));
            }
            items.push(js::get(ctx, values, &name)?);
            seen.push(name);
        }
        items
    } else {
        return Err(err::arg(
            ctx,
            V_ABI,
            "invalid tuple value",
            "tuple",
            P::Js(values.clone()),
        ));
    };
    if coders.len() != items.len() {
        return Err(err::arg(
            ctx,
            V_ABI,
            "types/value length mismatch",
            "tuple",
            P::Js(values.clone()),
        ));
    }
    pack_values(ctx, coders, &items, out)
}

fn pack_values(
    ctx: &mut Context,
    coders: &[Coder],
    items: &[JsValue],
    out: &mut Vec<u8>,
) -> JsResult<()> {
    let mut head: Vec<u8> = Vec::new();
    let mut tail: Vec<u8> = Vec::new();
    let mut fixups: Vec<(usize, usize)> = Vec::new();
    for (c, v) in coders.iter().zip(items) {
        if c.dynamic() {
            let off = tail.len();
            encode_value(ctx, c, v, &mut tail)?;
            fixups.push((head.len(), off));
            head.extend_from_slice(&[0u8; 32]);
        } else {
            encode_value(ctx, c, v, &mut head)?;
        }
    }
    let base = head.len();
    for (pos, off) in fixups {
        head[pos..pos + 32].copy_from_slice(&word_usize(base + off));
    }
    out.extend_from_slice(&head);
    out.extend_from_slice(&tail);
    Ok(())
}

// ---------------------------------------------------------------- decode

enum Dv {
    Big(BigInt),
    Num(f64),
    Bool(bool),
    Str(JsString),
    Hex(String),
    Null,
    List {
        items: Vec<Dv>,
        names: Vec<Option<String>>,
    },
    Err(JsValue),
}

struct DErr {
    error: JsError,
    overrun: bool,
}

impl From<JsError> for DErr {
    fn from(error: JsError) -> Self {
        DErr {
            error,
            overrun: false,
        }
    }
}

struct Reader<'a> {
    data: &'a [u8],
    offset: usize,
    loose: bool,
}

impl<'a> Reader<'a> {
    fn sub(&self, off: usize) -> Reader<'a> {
        let start = self.offset.saturating_add(off).min(self.data.len());
        Reader {
            data: &self.data[start..],
            offset: 0,
            loose: self.loose,
        }
    }

    fn read_bytes(
        &mut self,
        ctx: &mut Context,
        length: u64,
        loose: bool,
    ) -> Result<&'a [u8], DErr> {
        let mut aligned = length.div_ceil(32).saturating_mul(32);
        let avail = self.data.len() as u64;
        let off = self.offset as u64;
        if off.saturating_add(aligned) > avail {
            if self.loose && loose && off.saturating_add(length) <= avail {
                aligned = length;
            } else {
                let e = err::make(
                    ctx,
                    V_ABI,
                    "data out-of-bounds",
                    BUFFER_OVERRUN,
                    vec![
                        ("length", P::num(avail as f64)),
                        ("offset", P::num(off.saturating_add(aligned) as f64)),
                    ],
                );
                return Err(DErr {
                    error: e,
                    overrun: true,
                });
            }
        }
        let start = self.offset;
        let end = start + aligned as usize;
        self.offset = end;
        Ok(&self.data[start..start + length as usize])
    }

    fn read_value(&mut self, ctx: &mut Context) -> Result<BigInt, DErr> {
        let b = self.read_bytes(ctx, 32, false)?;
        Ok(BigInt::from_bytes_be(num_bigint::Sign::Plus, b))
    }
}

fn to_number(ctx: &mut Context, v: &BigInt) -> Result<u64, DErr> {
    match bignumber::to_number_checked(v) {
        Some(n) => Ok(n as u64),
        None => {
            let s = v.to_str_radix(10);
            Err(bignumber::fault(ctx, "overflow", "toNumber", Some(P::str(&s))).into())
        }
    }
}

fn decode_value(ctx: &mut Context, coder: &Coder, r: &mut Reader<'_>) -> Result<Dv, DErr> {
    match &coder.kind {
        Kind::Number { size, signed } => {
            let bits = (*size * 8) as u64;
            let mut v = bignumber::mask(&r.read_value(ctx)?, bits);
            if *signed {
                v = bignumber::from_twos(&v, bits);
            }
            if bits <= 48 {
                return Ok(Dv::Num(v.to_f64().unwrap_or(0.0)));
            }
            Ok(Dv::Big(v))
        }
        Kind::Address => {
            let v = r.read_value(ctx)?;
            let h = bignumber::to_hex(&v);
            let padded = bytes::hex_zero_pad(ctx, &js::s(&h), 20)?;
            Ok(Dv::Hex(address::checksum_hex40(&padded[2..])))
        }
        Kind::Bool => Ok(Dv::Bool(!r.read_value(ctx)?.is_zero())),
        Kind::Bytes | Kind::Str => {
            let len = r.read_value(ctx)?;
            let len = to_number(ctx, &len)?;
            let b = r.read_bytes(ctx, len, true)?;
            if matches!(coder.kind, Kind::Str) {
                Ok(Dv::Str(strings::to_utf8_string(ctx, b)?))
            } else {
                Ok(Dv::Hex(bytes::hex(b)))
            }
        }
        Kind::Fixed(n) => {
            let b = r.read_bytes(ctx, *n as u64, false)?;
            Ok(Dv::Hex(bytes::hex(b)))
        }
        Kind::Null => {
            r.read_bytes(ctx, 0, false)?;
            Ok(Dv::Null)
        }
        Kind::Array { child, length } => {
            let count = if *length == -1 {
                let c = r.read_value(ctx)?;
                let c = to_number(ctx, &c)?;
                if (c as f64) * 32.0 > r.data.len() as f64 {
                    let e = err::make(
                        ctx,
                        V_ABI,
                        "insufficient data length",
                        BUFFER_OVERRUN,
                        vec![
                            ("length", P::num(r.data.len() as f64)),
                            ("count", P::num(c as f64)),
                        ],
                    );
                    return Err(DErr {
                        error: e,
                        overrun: true,
                    });
                }
                c as usize
            } else {
                *length as usize
            };
            let mut anon = (**child).clone();
            anon.anonymous = true;
            anon.local_name = None;
            let coders = vec![anon; count];
            unpack(ctx, r, &coders)
        }
        Kind::Tuple(coders) => unpack(ctx, r, coders),
    }
}

fn decorate_error(ctx: &mut Context, e: JsError, coder: &Coder) -> JsResult<JsValue> {
    let v = e.into_opaque(ctx)?;
    if let Some(o) = v.as_object() {
        o.set(js_string!("baseType"), js::s(&coder.name()), false, ctx)?;
        o.set(js_string!("name"), coder.local_name_js(), false, ctx)?;
        o.set(js_string!("type"), js::s(&coder.ty()), false, ctx)?;
    }
    Ok(v)
}

fn unpack(ctx: &mut Context, r: &mut Reader<'_>, coders: &[Coder]) -> Result<Dv, DErr> {
    let base = r.sub(0);
    let mut items = Vec::with_capacity(coders.len());
    for c in coders {
        let res = if c.dynamic() {
            let off = r.read_value(ctx)?;
            let off = to_number(ctx, &off)?;
            let mut sub = base.sub(off as usize);
            decode_value(ctx, c, &mut sub)
        } else {
            decode_value(ctx, c, r)
        };
        let v = match res {
            Ok(v) => v,
            Err(e) if e.overrun => return Err(e),
            Err(e) => Dv::Err(decorate_error(ctx, e.error, c)?),
        };
        if !matches!(v, Dv::Null) {
            items.push(v);
        }
    }
    // Named keys only for uniquely named coders.
    let mut names = Vec::with_capacity(coders.len());
    for c in coders {
        let n = match (&c.local_name, c.anonymous) {
            (Some(n), false) if !n.is_empty() => {
                let count = coders
                    .iter()
                    .filter(|o| !o.anonymous && o.local_name.as_deref() == Some(n.as_str()))
                    .count();
                (count == 1).then(|| n.clone())
            }
            _ => None,
        };
        names.push(n);
    }
    Ok(Dv::List { items, names })
}

fn thrower(ctx: &mut Context, e: JsValue) -> JsObject {
    FunctionObjectBuilder::new(
        ctx.realm(),
        NativeFunction::from_copy_closure_with_captures(
            |_, _, e: &JsValue, _| Err(JsError::from_opaque(e.clone())),
            e,
        ),
    )
    .build()
    .into()
}

fn to_js(ctx: &mut Context, v: Dv) -> JsResult<JsValue> {
    Ok(match v {
        Dv::Big(b) => bignumber::make(ctx, &b)?,
        Dv::Num(n) => JsValue::from(n),
        Dv::Bool(b) => b.into(),
        Dv::Str(s) => s.into(),
        Dv::Hex(h) => js::s(&h),
        Dv::Null => JsValue::null(),
        Dv::Err(e) => e,
        Dv::List { items, names } => {
            let is_err: Vec<Option<JsValue>> = items
                .iter()
                .map(|i| {
                    if let Dv::Err(e) = i {
                        Some(e.clone())
                    } else {
                        None
                    }
                })
                .collect();
            let mut vals = Vec::with_capacity(items.len());
            for i in items {
                vals.push(to_js(ctx, i)?);
            }
            let arr: JsObject = js::array(ctx, vals.clone())
                .as_object()
                .ok_or_else(|| err::type_error("array"))?;
            for (index, name) in names.iter().enumerate() {
                let Some(name) = name else { continue };
                let key = if name == "length" {
                    "_length"
                } else {
                    name.as_str()
                };
                if !js::is_nullish(&arr.get(js::jstr(key), ctx)?) {
                    continue;
                }
                let value = vals.get(index).cloned().unwrap_or_default();
                match is_err.get(index).cloned().flatten() {
                    Some(e) => {
                        let g = thrower(ctx, e);
                        arr.define_property_or_throw(
                            js::jstr(key),
                            PropertyDescriptor::builder()
                                .get(g)
                                .enumerable(true)
                                .configurable(true),
                            ctx,
                        )?;
                    }
                    None => {
                        arr.set(js::jstr(key), value, true, ctx)?;
                    }
                }
            }
            for (index, e) in is_err.into_iter().enumerate() {
                if let Some(e) = e {
                    let g = thrower(ctx, e);
                    arr.define_property_or_throw(
                        index,
                        PropertyDescriptor::builder()
                            .get(g)
                            .enumerable(true)
                            .configurable(true),
                        ctx,
                    )?;
                }
            }
            js::freeze(ctx, &arr)?;
            arr.into()
        }
    })
}

// ---------------------------------------------------------------- JS API

fn coders_of(ctx: &mut Context, types: &[JsValue]) -> JsResult<Vec<Coder>> {
    let mut out = Vec::with_capacity(types.len());
    for t in types {
        let p = param_from(ctx, t)?;
        out.push(get_coder(ctx, &p)?);
    }
    Ok(out)
}

pub(crate) fn f_encode(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let types = js::arg(args, 0);
    let values = js::arg(args, 1);
    let tlen = js::get(ctx, &types, "length")?;
    let vlen = js::get(ctx, &values, "length")?;
    if tlen.to_number(ctx)? != vlen.to_number(ctx)? || js::is_nullish(&tlen) {
        let count = js::plain_object(ctx, vec![("types", tlen), ("values", vlen)]);
        let value = js::plain_object(ctx, vec![("types", types), ("values", values)]);
        return Err(err::make(
            ctx,
            V_ABI,
            "types/values length mismatch",
            INVALID_ARGUMENT,
            vec![
                ("count", P::Js(count.into())),
                ("value", P::Js(value.into())),
            ],
        ));
    }
    let tys = js::array_items(ctx, &types)?;
    let coders = coders_of(ctx, &tys)?;
    let mut out = Vec::new();
    pack(ctx, &coders, &values, &mut out)?;
    Ok(js::s(&bytes::hex(&out)))
}

pub(crate) fn f_decode(_: &JsValue, args: &[JsValue], ctx: &mut Context) -> JsResult<JsValue> {
    let tys = js::array_items(ctx, &js::arg(args, 0))?;
    let coders = coders_of(ctx, &tys)?;
    let data = bytes::arrayify(ctx, &js::arg(args, 1))?;
    let loose = js::arg(args, 2).to_boolean();
    let mut r = Reader {
        data: &data,
        offset: 0,
        loose,
    };
    match unpack(ctx, &mut r, &coders) {
        Ok(v) => to_js(ctx, v),
        Err(e) => Err(e.error),
    }
}

pub(crate) fn install(ctx: &mut Context, utils: &JsObject) -> JsResult<()> {
    let coder = js::new_object(ctx);
    js::read_only(ctx, &coder, "coerceFunc", JsValue::null())?;
    js::method(
        ctx,
        &coder,
        "encode",
        2,
        NativeFunction::from_fn_ptr(f_encode),
    )?;
    js::method(
        ctx,
        &coder,
        "decode",
        3,
        NativeFunction::from_fn_ptr(f_decode),
    )?;
    utils.set(js_string!("defaultAbiCoder"), coder, false, ctx)?;
    Ok(())
}
