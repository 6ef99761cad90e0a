//! A node-like `util.inspect` for log lines: `{ a: 1, b: 'x' }`, `[ 1, 2 ]`, `[Function: f]`.
//!
//! Differences from node, on purpose: output is always one line; accessors are shown as
//! `[Getter]`/`[Setter]` and never invoked; at most [`MAX_ITEMS`] entries per container and
//! nesting deeper than [`MAX_DEPTH`] prints `[Object]`/`[Array]`. Formatting stops once the
//! output exceeds the byte budget, so one huge object cannot cost unbounded time.

use boa_engine::builtins::error::Error as ErrorData;
use boa_engine::object::JsObject;
use boa_engine::object::builtins::{
    JsArrayBuffer, JsDate, JsMap, JsPromise, JsRegExp, JsSet, JsTypedArray,
};
use boa_engine::property::PropertyKey;
use boa_engine::{Context, JsResult, JsString, JsValue, JsVariant, js_string};

/// Nesting deeper than this prints `[Object]` / `[Array]` (node's default depth).
const MAX_DEPTH: usize = 2;
/// Entries shown per array, object, map or set.
const MAX_ITEMS: usize = 100;

/// Formats console arguments node-style: printf-like directives when the first argument
/// is a string, then every remaining argument (strings raw) joined by spaces.
pub(crate) fn format_args(args: &[JsValue], budget: usize, ctx: &mut Context) -> JsResult<String> {
    let mut f = Formatter {
        out: String::new(),
        budget,
        seen: Vec::new(),
    };
    let mut rest = args;
    if let Some((first, tail)) = args.split_first()
        && let Some(template) = first.as_string()
        && !tail.is_empty()
    {
        rest = f.printf(&template.to_std_string_escaped(), tail, ctx)?;
    } else if let Some((first, tail)) = args.split_first() {
        f.top(first, ctx)?;
        rest = tail;
    }
    for arg in rest {
        if f.full() {
            break;
        }
        f.out.push(' ');
        f.top(arg, ctx)?;
    }
    Ok(f.out)
}

/// One value formatted as a nested value would be (strings quoted), for error messages.
pub(crate) fn inspect(value: &JsValue, budget: usize, ctx: &mut Context) -> JsResult<String> {
    let mut f = Formatter {
        out: String::new(),
        budget,
        seen: Vec::new(),
    };
    f.value(value, 0, ctx)?;
    Ok(f.out)
}

struct Formatter {
    out: String,
    budget: usize,
    /// Objects on the current path, for `[Circular]`.
    seen: Vec<JsObject>,
}

impl Formatter {
    fn full(&self) -> bool {
        self.out.len() > self.budget
    }

    /// A top-level argument: strings are printed raw.
    fn top(&mut self, value: &JsValue, ctx: &mut Context) -> JsResult<()> {
        match value.as_string() {
            Some(s) => {
                self.out.push_str(&s.to_std_string_escaped());
                Ok(())
            }
            None => self.value(value, 0, ctx),
        }
    }

    /// Node's printf subset: `%s %d %i %f %j %o %O %c %%`. Returns the unused arguments.
    fn printf<'a>(
        &mut self,
        template: &str,
        mut args: &'a [JsValue],
        ctx: &mut Context,
    ) -> JsResult<&'a [JsValue]> {
        let mut chars = template.chars().peekable();
        while let Some(c) = chars.next() {
            if c != '%' {
                self.out.push(c);
                continue;
            }
            let Some(&d) = chars.peek() else {
                self.out.push('%');
                break;
            };
            if d == '%' {
                chars.next();
                self.out.push('%');
                continue;
            }
            if !matches!(d, 's' | 'd' | 'i' | 'f' | 'j' | 'o' | 'O' | 'c') {
                self.out.push('%');
                continue;
            }
            let Some((arg, tail)) = args.split_first() else {
                self.out.push('%');
                continue;
            };
            chars.next();
            args = tail;
            match d {
                's' if arg.is_object() || arg.is_symbol() => self.value(arg, 1, ctx)?,
                's' => self.top(arg, ctx)?,
                'd' | 'i' | 'f' => {
                    let n = if arg.is_object() || arg.is_symbol() {
                        f64::NAN
                    } else {
                        arg.to_number(ctx)?
                    };
                    let n = if d == 'f' { n } else { n.trunc() };
                    self.number(n, ctx)?;
                }
                'j' => match super::state::json_stringify(arg, ctx) {
                    Ok(Some(json)) => self.out.push_str(&json),
                    Ok(None) => self.out.push_str("undefined"),
                    Err(_) => self.out.push_str("[Circular]"),
                },
                'c' => {}
                _ => self.value(arg, 0, ctx)?,
            }
        }
        Ok(args)
    }

    fn number(&mut self, n: f64, ctx: &mut Context) -> JsResult<()> {
        if n == 0.0 && n.is_sign_negative() {
            self.out.push_str("-0");
        } else {
            let s = JsValue::from(n).to_string(ctx)?;
            self.out.push_str(&s.to_std_string_escaped());
        }
        Ok(())
    }

    fn value(&mut self, value: &JsValue, depth: usize, ctx: &mut Context) -> JsResult<()> {
        match value.variant() {
            JsVariant::Undefined => self.out.push_str("undefined"),
            JsVariant::Null => self.out.push_str("null"),
            JsVariant::Boolean(b) => self.out.push_str(if b { "true" } else { "false" }),
            JsVariant::Integer32(i) => self.out.push_str(&i.to_string()),
            JsVariant::Float64(n) => self.number(n, ctx)?,
            JsVariant::String(s) => self.quoted(&s.to_std_string_escaped()),
            JsVariant::BigInt(b) => {
                self.out.push_str(&b.to_string());
                self.out.push('n');
            }
            JsVariant::Symbol(s) => self
                .out
                .push_str(&s.descriptive_string().to_std_string_escaped()),
            JsVariant::Object(o) => self.object(&o, depth, ctx)?,
        }
        Ok(())
    }

    fn quoted(&mut self, s: &str) {
        let quote = if !s.contains('\'') {
            '\''
        } else if !s.contains('"') {
            '"'
        } else if !s.contains('`') {
            '`'
        } else {
            '\''
        };
        self.out.push(quote);
        for c in s.chars() {
            match c {
                '\n' => self.out.push_str("\\n"),
                '\t' => self.out.push_str("\\t"),
                '\r' => self.out.push_str("\\r"),
                '\\' => self.out.push_str("\\\\"),
                c if c == quote => {
                    self.out.push('\\');
                    self.out.push(c);
                }
                c if (c as u32) < 0x20 => self.out.push_str(&format!("\\x{:02X}", c as u32)),
                c => self.out.push(c),
            }
            if self.full() {
                return;
            }
        }
        self.out.push(quote);
    }

    fn object(&mut self, obj: &JsObject, depth: usize, ctx: &mut Context) -> JsResult<()> {
        if self.seen.iter().any(|s| JsObject::equals(s, obj)) {
            self.out.push_str("[Circular]");
            return Ok(());
        }
        if obj.is_callable() {
            let name = data_string(obj, js_string!("name")).unwrap_or_default();
            if name.is_empty() {
                self.out.push_str("[Function (anonymous)]");
            } else {
                self.out.push_str(&format!("[Function: {name}]"));
            }
            return Ok(());
        }
        if obj.is::<ErrorData>() {
            let name = obj.get(js_string!("name"), ctx)?.to_string(ctx)?;
            let message = obj.get(js_string!("message"), ctx)?.to_string(ctx)?;
            self.out.push_str(&name.to_std_string_escaped());
            if !message.is_empty() {
                self.out.push_str(": ");
                self.out.push_str(&message.to_std_string_escaped());
            }
            return Ok(());
        }
        if let Ok(date) = JsDate::from_object(obj.clone()) {
            match date.to_iso_string(ctx) {
                Ok(s) => self
                    .out
                    .push_str(&s.to_string(ctx)?.to_std_string_escaped()),
                Err(_) => self.out.push_str("Invalid Date"),
            }
            return Ok(());
        }
        if let Ok(re) = JsRegExp::from_object(obj.clone()) {
            self.out.push_str(&re.to_string(ctx)?);
            return Ok(());
        }
        if let Ok(promise) = JsPromise::from_object(obj.clone()) {
            use boa_engine::builtins::promise::PromiseState;
            self.out.push_str("Promise { ");
            match promise.state() {
                PromiseState::Pending => self.out.push_str("<pending>"),
                PromiseState::Fulfilled(v) => self.nested(&v, depth, ctx)?,
                PromiseState::Rejected(v) => {
                    self.out.push_str("<rejected> ");
                    self.nested(&v, depth, ctx)?;
                }
            }
            self.out.push_str(" }");
            return Ok(());
        }
        if let Ok(buffer) = JsArrayBuffer::from_object(obj.clone()) {
            self.out.push_str(&format!(
                "ArrayBuffer {{ byteLength: {} }}",
                buffer.byte_length()
            ));
            return Ok(());
        }

        let is_array = obj.is_array();
        if depth > MAX_DEPTH {
            self.out
                .push_str(if is_array { "[Array]" } else { "[Object]" });
            return Ok(());
        }
        self.seen.push(obj.clone());
        let result = self.container(obj, is_array, depth, ctx);
        self.seen.pop();
        result
    }

    fn nested(&mut self, value: &JsValue, depth: usize, ctx: &mut Context) -> JsResult<()> {
        self.value(value, depth + 1, ctx)
    }

    /// Arrays, typed arrays, maps, sets and ordinary objects.
    fn container(
        &mut self,
        obj: &JsObject,
        is_array: bool,
        depth: usize,
        ctx: &mut Context,
    ) -> JsResult<()> {
        let mut items = Items::new();
        if let Ok(typed) = JsTypedArray::from_object(obj.clone()) {
            let len = typed.length(ctx)?;
            let kind = typed
                .kind()
                .map(|k| format!("{k:?}Array"))
                .unwrap_or_default();
            self.out.push_str(&format!("{kind}({len}) "));
            self.out.push('[');
            for i in 0..len.min(MAX_ITEMS) {
                items.sep(self);
                let v = typed.at(i as i64, ctx)?;
                self.nested(&v, depth, ctx)?;
                if self.full() {
                    return Ok(());
                }
            }
            items.more(self, len);
            items.close(self, ']');
            return Ok(());
        }
        if let Ok(map) = JsMap::from_object(obj.clone()) {
            let size = map.get_size(ctx)?.to_number(ctx)? as usize;
            self.out.push_str(&format!("Map({size}) {{"));
            let mut pairs = Vec::new();
            map.for_each_native(|k, v| {
                if pairs.len() < MAX_ITEMS {
                    pairs.push((k, v));
                }
                Ok(())
            })?;
            for (k, v) in pairs {
                items.sep(self);
                self.nested(&k, depth, ctx)?;
                self.out.push_str(" => ");
                self.nested(&v, depth, ctx)?;
                if self.full() {
                    return Ok(());
                }
            }
            items.more(self, size);
            items.close(self, '}');
            return Ok(());
        }
        if let Ok(set) = JsSet::from_object(obj.clone()) {
            let mut values = Vec::new();
            let mut size = 0usize;
            set.for_each_native(|v| {
                size += 1;
                if values.len() < MAX_ITEMS {
                    values.push(v);
                }
                Ok(())
            })?;
            self.out.push_str(&format!("Set({size}) {{"));
            for v in values {
                items.sep(self);
                self.nested(&v, depth, ctx)?;
                if self.full() {
                    return Ok(());
                }
            }
            items.more(self, size);
            items.close(self, '}');
            return Ok(());
        }

        let keys = obj.own_property_keys(ctx)?;
        let (open, close) = if is_array { ('[', ']') } else { ('{', '}') };
        if !is_array
            && let Some(class) = class_name(obj)
            && class != "Object"
        {
            self.out.push_str(&class);
            self.out.push(' ');
        }
        self.out.push(open);
        let mut shown = 0usize;
        let mut total = 0usize;
        for key in keys {
            if is_array && key == PropertyKey::from(js_string!("length")) {
                continue;
            }
            let desc = obj.borrow().properties().get(&key);
            let (enumerable, value, getter, setter) = match &desc {
                Some(d) => (
                    d.enumerable().unwrap_or(false),
                    d.value().cloned(),
                    d.get().is_some_and(|g| !g.is_undefined()),
                    d.set().is_some_and(|s| !s.is_undefined()),
                ),
                // Exotic objects (proxies…): fall back to [[Get]].
                None => (true, Some(obj.get(key.clone(), ctx)?), false, false),
            };
            if !enumerable {
                continue;
            }
            total += 1;
            if shown >= MAX_ITEMS {
                continue;
            }
            shown += 1;
            items.sep(self);
            let is_index = matches!(key, PropertyKey::Index(_));
            if !(is_array && is_index) {
                self.key(&key);
                self.out.push_str(": ");
            }
            match (value, getter, setter) {
                (Some(v), _, _) => self.nested(&v, depth, ctx)?,
                (None, true, true) => self.out.push_str("[Getter/Setter]"),
                (None, true, false) => self.out.push_str("[Getter]"),
                (None, false, _) => self.out.push_str("[Setter]"),
            }
            if self.full() {
                return Ok(());
            }
        }
        items.more(self, total);
        items.close(self, close);
        Ok(())
    }

    fn key(&mut self, key: &PropertyKey) {
        match key {
            PropertyKey::String(s) => {
                let s = s.to_std_string_escaped();
                if is_identifier(&s) {
                    self.out.push_str(&s);
                } else {
                    self.quoted(&s);
                }
            }
            PropertyKey::Index(i) => self.quoted(&i.get().to_string()),
            PropertyKey::Symbol(sym) => {
                self.out.push('[');
                self.out
                    .push_str(&sym.descriptive_string().to_std_string_escaped());
                self.out.push(']');
            }
        }
    }
}

/// Separators and the `... N more items` tail of one container.
struct Items {
    count: usize,
}

impl Items {
    fn new() -> Self {
        Self { count: 0 }
    }

    fn sep(&mut self, f: &mut Formatter) {
        f.out.push_str(if self.count == 0 { " " } else { ", " });
        self.count += 1;
    }

    fn more(&mut self, f: &mut Formatter, total: usize) {
        if total > self.count {
            let more = total - self.count;
            self.sep(f);
            f.out.push_str(&format!(
                "... {more} more item{}",
                if more == 1 { "" } else { "s" }
            ));
        }
    }

    fn close(&self, f: &mut Formatter, c: char) {
        if self.count > 0 {
            f.out.push(' ');
        }
        f.out.push(c);
    }
}

/// The value of an own data property, as a Rust string, without running user code.
fn data_string(obj: &JsObject, key: JsString) -> Option<String> {
    let desc = obj.borrow().properties().get(&key.into())?;
    desc.value()?.as_string().map(|s| s.to_std_string_escaped())
}

/// `obj.constructor.name` through data properties of the prototype only.
fn class_name(obj: &JsObject) -> Option<String> {
    let Some(proto) = obj.prototype() else {
        return Some("[Object: null prototype]".to_owned());
    };
    let ctor = proto
        .borrow()
        .properties()
        .get(&js_string!("constructor").into())?
        .value()?
        .as_object()?;
    data_string(&ctor, js_string!("name"))
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars
        .next()
        .is_some_and(|c| c.is_alphabetic() || c == '_' || c == '$')
        && chars.all(|c| c.is_alphanumeric() || c == '_' || c == '$')
}
