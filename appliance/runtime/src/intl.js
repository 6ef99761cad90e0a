// `Intl.DateTimeFormat` for actions: English (United States) formats, the Gregorian
// calendar, and the IANA time zones of the tz database the worker carries; and the
// `Date.prototype.toLocale*String` methods on it. Evaluated the first time an action
// reads `Intl` or calls one of those; returns `{ Intl, toLocale }`. The native side
// passes `zone`:
//   zone(name)     -> the zone's canonical name ("UTC" for its aliases), or a RangeError
//   zone(name, ms) -> [offset in seconds, tz database abbreviation] at that instant
// What it formats is compared with node's ICU output in tests/intl_differential.rs; what
// it refuses (other calendars, long zone names, odd field combinations) throws a RangeError
// that says so, rather than guess.
(function (zone) {
  "use strict";

  const LOCALE = "en-US";
  const MONTHS = ["January", "February", "March", "April", "May", "June", "July",
    "August", "September", "October", "November", "December"];
  const WEEKDAYS = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday",
    "Saturday"];
  const UTC_NAMES = ["utc", "etc/utc", "gmt", "etc/gmt", "uct", "etc/uct", "zulu",
    "etc/zulu", "universal", "etc/universal", "greenwich", "etc/greenwich", "gmt0",
    "etc/gmt0", "gmt+0", "gmt-0", "etc/gmt+0", "etc/gmt-0"];
  // The zone abbreviations en-US shows (CLDR's North American metazones), each with the
  // UTC offset it stands for; any other zone is shown as "GMT+h[:mm]".
  const SHORT_NAMES = {
    EST: -18000, EDT: -14400, CST: -21600, CDT: -18000, MST: -25200, MDT: -21600,
    PST: -28800, PDT: -25200, AKST: -32400, AKDT: -28800, HST: -36000, HDT: -32400,
    AST: -14400, ADT: -10800,
  };
  // Zones whose en-US abbreviation is not the tz database's.
  const RENAMED = { "America/Adak": { HST: "HAST", HDT: "HADT" } };

  const OPTION_VALUES = {
    weekday: ["narrow", "short", "long"],
    era: ["narrow", "short", "long"],
    year: ["2-digit", "numeric"],
    month: ["2-digit", "numeric", "narrow", "short", "long"],
    day: ["2-digit", "numeric"],
    dayPeriod: ["narrow", "short", "long"],
    hour: ["2-digit", "numeric"],
    minute: ["2-digit", "numeric"],
    second: ["2-digit", "numeric"],
    timeZoneName: ["short", "long", "shortOffset", "longOffset", "shortGeneric",
      "longGeneric"],
    hourCycle: ["h11", "h12", "h23", "h24"],
    dateStyle: ["full", "long", "medium", "short"],
    timeStyle: ["full", "long", "medium", "short"],
    localeMatcher: ["lookup", "best fit"],
    formatMatcher: ["basic", "best fit"],
  };
  const FIELDS = ["weekday", "era", "year", "month", "day", "dayPeriod", "hour", "minute",
    "second", "fractionalSecondDigits", "timeZoneName"];
  // The fields whose absence means "show the date" (era and the zone name do not count).
  const DEFAULTING = ["weekday", "year", "month", "day", "dayPeriod", "hour", "minute",
    "second", "fractionalSecondDigits"];

  const slots = new WeakMap();

  function unsupported(what) {
    return new RangeError(`Intl.DateTimeFormat here formats en-US only and does not support ${what}`);
  }

  function getOption(options, name) {
    const value = options[name];
    if (value === undefined) return undefined;
    const text = String(value);
    if (!OPTION_VALUES[name].includes(text)) {
      throw new RangeError(`Value ${text} out of range for Intl.DateTimeFormat options property ${name}`);
    }
    return text;
  }

  function canonicalLocales(locales) {
    if (locales === undefined) return [];
    const list = typeof locales === "string" ? [locales] : Array.from(Object(locales));
    return list.map((tag) => {
      if (typeof tag !== "string" && (typeof tag !== "object" || tag === null)) {
        throw new TypeError("Language ID should be string or object.");
      }
      const text = String(tag);
      if (!/^[A-Za-z]{2,8}(-[A-Za-z0-9]{1,8})*$/.test(text)) {
        throw new RangeError(`Incorrect locale information provided`);
      }
      return text;
    });
  }

  function timeZoneOf(value) {
    if (value === undefined) return "UTC";
    const name = String(value);
    if (UTC_NAMES.includes(name.toLowerCase())) return "UTC";
    try {
      return zone(name);
    } catch (e) {
      throw new RangeError(`Invalid time zone specified: ${name}`);
    }
  }

  function pad(n, width) {
    return String(n).padStart(width, "0");
  }

  function offsetName(seconds, long) {
    const sign = seconds < 0 ? "-" : "+";
    const abs = Math.abs(seconds);
    const h = Math.floor(abs / 3600);
    const m = Math.floor((abs % 3600) / 60);
    if (long) return `GMT${sign}${pad(h, 2)}:${pad(m, 2)}`;
    return m ? `GMT${sign}${h}:${pad(m, 2)}` : `GMT${sign}${h}`;
  }

  function zoneName(s, offset, abbreviation) {
    switch (s.zoneStyle) {
      case "shortOffset":
        return offsetName(offset, false);
      case "longOffset":
        return offsetName(offset, true);
      case "long":
        return "Coordinated Universal Time"; // only UTC gets here
      default: {
        if (s.timeZone === "UTC") return "UTC";
        const renamed = RENAMED[s.timeZone];
        const shown = (renamed && renamed[abbreviation]) || abbreviation;
        if (SHORT_NAMES[abbreviation] === offset) return shown;
        if (abbreviation === "GMT" && offset === 0) return "GMT";
        return offsetName(offset, false);
      }
    }
  }

  // The pattern: a list of [type, width] fields and string literals, as ICU's en-US
  // patterns have them.
  function datePattern(s) {
    const { weekday, year, month, day } = s;
    const text = month === "narrow" || month === "short" || month === "long";
    const parts = [];
    if (text) {
      if (year && day) parts.push(["month"], " ", ["day"], ", ", ["year"]);
      else if (year) parts.push(["month"], " ", ["year"]);
      else if (day) parts.push(["month"], " ", ["day"]);
      else parts.push(["month"]);
    } else {
      const order = [month && ["month"], day && ["day"], year && ["year"]].filter(Boolean);
      if (year && day && !month) throw unsupported("a year and a day without a month");
      order.forEach((f, i) => {
        if (i) parts.push("/");
        parts.push(f);
      });
    }
    if (weekday) {
      if (!parts.length) return [["weekday"]];
      if (!(month && day)) throw unsupported("a weekday with a year or month alone");
      return [["weekday"], ", ", ...parts];
    }
    return parts;
  }

  function timePattern(s) {
    const { hour, minute, second, fractionalSecondDigits: fraction } = s;
    const parts = [];
    if (hour) {
      if (second && !minute) throw unsupported("an hour and a second without a minute");
      parts.push(["hour"]);
      if (minute) parts.push(":", ["minute"]);
      if (second) parts.push(":", ["second"]);
    } else if (minute) {
      parts.push(["minute"]);
      if (second) parts.push(":", ["second"]);
    } else if (second) {
      parts.push(["second"]);
    }
    if (fraction) {
      if (second) parts.push(".");
      parts.push(["fractionalSecond"]);
    }
    // ICU (72 and later) puts a narrow no-break space before AM and PM
    if (hour && (s.hourCycle === "h11" || s.hourCycle === "h12")) parts.push("\u202f", ["dayPeriod"]);
    return parts;
  }

  function stylePattern(s) {
    const date = {
      short: { year: "2-digit", month: "numeric", day: "numeric" },
      medium: { year: "numeric", month: "short", day: "numeric" },
      long: { year: "numeric", month: "long", day: "numeric" },
      full: { weekday: "long", year: "numeric", month: "long", day: "numeric" },
    }[s.dateStyle];
    const time = {
      short: { hour: "numeric", minute: "2-digit" },
      medium: { hour: "numeric", minute: "2-digit", second: "2-digit" },
      long: { hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "short" },
      full: { hour: "numeric", minute: "2-digit", second: "2-digit", timeZoneName: "long" },
    }[s.timeStyle];
    return { date, time };
  }

  function buildPattern(s) {
    let date;
    let time;
    let glue;
    let zoneShown = s.timeZoneName;
    if (s.dateStyle || s.timeStyle) {
      const styles = stylePattern(s);
      date = styles.date ? datePattern({ ...s, ...styles.date }) : [];
      time = styles.time ? timePattern({ ...s, ...styles.time, fractionalSecondDigits: undefined }) : [];
      zoneShown = styles.time && styles.time.timeZoneName;
      glue = s.dateStyle === "long" || s.dateStyle === "full" ? " at " : ", ";
    } else {
      date = datePattern(s);
      time = timePattern(s);
      glue = s.month === "long" ? " at " : ", ";
      // a weekday alone runs into the time: "Wed 4 PM"
      if (time.length && date.length === 1 && date[0][0] === "weekday") glue = " ";
    }
    const pattern = [...date];
    if (time.length) {
      if (pattern.length) pattern.push(glue);
      pattern.push(...time);
    }
    s.zoneStyle = zoneShown;
    if (zoneShown) {
      if (time.length) pattern.push(" ");
      else if (pattern.length) pattern.push(glue);
      pattern.push(["timeZoneName"]);
    }
    return pattern;
  }

  function fieldValue(s, type, wall, offsetInfo) {
    const d = new Date(wall);
    const widths = s.shown;
    switch (type) {
      case "weekday": {
        const name = WEEKDAYS[d.getUTCDay()];
        return widths.weekday === "long" ? name : widths.weekday === "short" ? name.slice(0, 3) : name[0];
      }
      case "year": {
        const y = d.getUTCFullYear();
        const shown = y <= 0 ? 1 - y : y;
        return widths.year === "2-digit" ? pad(shown % 100, 2) : String(shown);
      }
      case "month": {
        const m = d.getUTCMonth();
        switch (widths.month) {
          case "long": return MONTHS[m];
          case "short": return MONTHS[m].slice(0, 3);
          case "narrow": return MONTHS[m][0];
          case "2-digit": return pad(m + 1, 2);
          default: return String(m + 1);
        }
      }
      case "day":
        return widths.day === "2-digit" ? pad(d.getUTCDate(), 2) : String(d.getUTCDate());
      case "hour": {
        const h = d.getUTCHours();
        const value = { h11: h % 12, h12: h % 12 || 12, h23: h, h24: h || 24 }[s.hourCycle];
        return widths.hour === "2-digit" ? pad(value, 2) : String(value);
      }
      case "minute":
        return widths.minute === "2-digit" ? pad(d.getUTCMinutes(), 2) : String(d.getUTCMinutes());
      case "second":
        return widths.second === "2-digit" ? pad(d.getUTCSeconds(), 2) : String(d.getUTCSeconds());
      case "fractionalSecond":
        return pad(d.getUTCMilliseconds(), 3).slice(0, s.fractionalSecondDigits);
      case "dayPeriod":
        return d.getUTCHours() < 12 ? "AM" : "PM";
      case "timeZoneName":
        return zoneName(s, offsetInfo[0], offsetInfo[1]);
      default:
        throw new TypeError(`no field ${type}`);
    }
  }

  function toParts(s, date) {
    let ms = date === undefined ? Date.now() : Number(date);
    if (!Number.isFinite(ms) || Math.abs(ms) > 8.64e15) throw new RangeError("Invalid time value");
    ms = Math.trunc(ms) + 0;
    const info = s.timeZone === "UTC" ? [0, "UTC"] : zone(s.timeZone, ms);
    const wall = ms + info[0] * 1000;
    return s.pattern.map((piece) =>
      typeof piece === "string"
        ? { type: "literal", value: piece }
        : { type: piece[0], value: fieldValue(s, piece[0], wall, info) });
  }

  // The widths each field is shown with (what resolvedOptions reports).
  function shownWidths(s) {
    const shown = {};
    for (const f of ["weekday", "year", "month", "day"]) if (s[f]) shown[f] = s[f];
    const twelve = s.hourCycle === "h11" || s.hourCycle === "h12";
    if (s.hour) shown.hour = twelve ? s.hour : "2-digit";
    if (s.minute) shown.minute = s.hour || s.second ? "2-digit" : "numeric";
    if (s.second) shown.second = s.minute ? "2-digit" : "numeric";
    return shown;
  }

  function DateTimeFormat(locales, options) {
    if (!new.target) return new DateTimeFormat(locales, options);
    // the formats are en-US's whatever is asked; "en" is reported as asked
    const requested = canonicalLocales(locales)[0];
    const opts = options === undefined ? {} : Object(options);
    const hour12 = opts.hour12 === undefined ? undefined : Boolean(opts.hour12);
    const s = {};
    const requestedCycle = getOption(opts, "hourCycle");
    if (opts.calendar !== undefined && String(opts.calendar) !== "gregory") {
      throw unsupported(`the calendar ${String(opts.calendar)}`);
    }
    if (opts.numberingSystem !== undefined && String(opts.numberingSystem) !== "latn") {
      throw unsupported(`the numbering system ${String(opts.numberingSystem)}`);
    }
    s.timeZone = timeZoneOf(opts.timeZone);
    for (const f of FIELDS) {
      if (f === "fractionalSecondDigits") {
        const v = opts[f];
        if (v !== undefined) {
          const n = Math.floor(Number(v));
          if (!(n >= 1 && n <= 3)) throw new RangeError("fractionalSecondDigits value is out of range.");
          s[f] = n;
        }
      } else {
        s[f] = getOption(opts, f);
      }
    }
    getOption(opts, "formatMatcher");
    s.dateStyle = getOption(opts, "dateStyle");
    s.timeStyle = getOption(opts, "timeStyle");
    if (s.dateStyle || s.timeStyle) {
      const first = FIELDS.find((f) => s[f] !== undefined);
      if (first) {
        throw new TypeError(`Can't set option ${first} when ${s.dateStyle ? "dateStyle" : "timeStyle"} is used`);
      }
    } else if (!DEFAULTING.some((f) => s[f] !== undefined)) {
      s.year = s.month = s.day = "numeric";
    }
    if (s.era) throw unsupported("eras");
    if (s.dayPeriod) throw unsupported("dayPeriod");
    const longZone = s.timeZoneName === "long" || s.timeStyle === "full";
    if ((longZone && s.timeZone !== "UTC") || s.timeZoneName === "shortGeneric" || s.timeZoneName === "longGeneric") {
      throw unsupported(`timeZoneName "${s.timeStyle === "full" ? "long" : s.timeZoneName}" (for ${s.timeZone}): use short, shortOffset or longOffset`);
    }
    // en-US counts hours 1-12 (h12); hour12 picks between h12 and h24 (ECMA-402 as node
    // 20 implements it), and wins over hourCycle.
    s.hourCycle = hour12 === undefined ? requestedCycle || "h12" : hour12 ? "h12" : "h24";
    s.hasTime = Boolean(s.hour || s.timeStyle);
    s.pattern = buildPattern(s);
    s.shown = s.dateStyle || s.timeStyle
      ? shownWidths({ ...s, ...stylePattern(s).date, ...stylePattern(s).time })
      : shownWidths(s);
    s.locale = requested && /^en$/i.test(requested) ? "en" : LOCALE;
    slots.set(this, s);
  }

  // How V8 shows a receiver in its "incompatible receiver" errors.
  function receiver(value) {
    return typeof value === "object" && value !== null
      ? `#<${(value.constructor && value.constructor.name) || "Object"}>`
      : String(value);
  }

  function slot(obj, method) {
    const s = slots.get(obj);
    if (!s) {
      throw new TypeError(`Method Intl.DateTimeFormat.prototype.${method} called on incompatible receiver ${receiver(obj)}`);
    }
    return s;
  }

  function defineMethod(target, name, fn) {
    Object.defineProperty(target, name, { value: fn, writable: true, enumerable: false, configurable: true });
  }

  const bound = new WeakMap();
  Object.defineProperty(DateTimeFormat.prototype, "format", {
    get() {
      const s = slot(this, "format");
      if (!bound.has(this)) {
        // as V8 does: formatToParts keeps ICU's narrow no-break space, format gives a
        // plain space (what code written before ICU 72 compares against)
        const f = (date) => toParts(s, date).map((p) => p.value).join("").replace(/\u202f/g, " ");
        Object.defineProperty(f, "name", { value: "" });
        bound.set(this, f);
      }
      return bound.get(this);
    },
    enumerable: false,
    configurable: true,
  });
  defineMethod(DateTimeFormat.prototype, "formatToParts", function formatToParts(date) {
    return toParts(slot(this, "formatToParts"), date);
  });
  defineMethod(DateTimeFormat.prototype, "resolvedOptions", function resolvedOptions() {
    const s = slot(this, "resolvedOptions");
    const out = { locale: s.locale, calendar: "gregory", numberingSystem: "latn", timeZone: s.timeZone };
    if (s.hasTime) {
      out.hourCycle = s.hourCycle;
      out.hour12 = s.hourCycle === "h11" || s.hourCycle === "h12";
    }
    if (s.dateStyle || s.timeStyle) {
      if (s.dateStyle) out.dateStyle = s.dateStyle;
      if (s.timeStyle) out.timeStyle = s.timeStyle;
      return out;
    }
    for (const f of ["weekday", "year", "month", "day", "hour", "minute", "second"]) {
      if (s.shown[f]) out[f] = s.shown[f];
    }
    if (s.fractionalSecondDigits) out.fractionalSecondDigits = s.fractionalSecondDigits;
    if (s.timeZoneName) out.timeZoneName = s.timeZoneName;
    return out;
  });
  Object.defineProperty(DateTimeFormat.prototype, Symbol.toStringTag, {
    value: "Intl.DateTimeFormat", configurable: true,
  });
  defineMethod(DateTimeFormat, "supportedLocalesOf", function supportedLocalesOf(locales) {
    return canonicalLocales(locales).filter((tag) => /^en(-US)?$/i.test(tag));
  });

  const DATE_FIELDS = ["weekday", "year", "month", "day"];
  const TIME_FIELDS = ["dayPeriod", "hour", "minute", "second", "fractionalSecondDigits"];
  const getTime = Date.prototype.getTime;
  const toStringTag = Object.prototype.toString;

  // Date.prototype.toLocaleString ("any"), toLocaleDateString ("date") and
  // toLocaleTimeString ("time"): a DateTimeFormat of the options, with each one's
  // defaults when the options name none of its fields (ECMA-402's ToDateTimeOptions).
  function toLocale(kind, date, locales, options) {
    if (toStringTag.call(date) !== "[object Date]") {
      const method = { any: "toLocaleString", date: "toLocaleDateString", time: "toLocaleTimeString" }[kind];
      throw new TypeError(`Method Date.prototype.${method} called on incompatible receiver ${receiver(date)}`);
    }
    const t = getTime.call(date);
    if (Number.isNaN(t)) return "Invalid Date";
    const o = Object.create(options === undefined ? null : Object(options));
    if (kind === "date" && o.timeStyle !== undefined) throw new TypeError("Invalid option : timeStyle");
    if (kind === "time" && o.dateStyle !== undefined) throw new TypeError("Invalid option : dateStyle");
    const has = (fields) => fields.some((f) => o[f] !== undefined);
    const styled = o.dateStyle !== undefined || o.timeStyle !== undefined;
    const needDefaults = !styled && (kind === "date" ? !has(DATE_FIELDS)
      : kind === "time" ? !has(TIME_FIELDS) : !has(DATE_FIELDS) && !has(TIME_FIELDS));
    if (needDefaults && kind !== "time") o.year = o.month = o.day = "numeric";
    if (needDefaults && kind !== "date") o.hour = o.minute = o.second = "numeric";
    return new DateTimeFormat(locales, o).format(t);
  }

  const Intl = {};
  defineMethod(Intl, "DateTimeFormat", DateTimeFormat);
  defineMethod(Intl, "getCanonicalLocales", function getCanonicalLocales(locales) {
    return canonicalLocales(locales);
  });
  Object.defineProperty(Intl, Symbol.toStringTag, { value: "Intl", configurable: true });
  return { Intl, toLocale };
})
