// Differential cases for the action runtime's Intl.DateTimeFormat (tests/intl_differential.rs).
// Evaluated once in node (its ICU, TZ=UTC) and once in boa with the runtime's Intl. Each
// case is an expression; its value is serialised with JSON.stringify, a throw as its
// constructor name and message. Results compare entry by entry.
//
// The matrix: every option combination the runtime supports, at instants chosen for their
// edges (single-digit fields, midnight and noon, the turn of a year, a leap day, both sides
// of a daylight-saving change, a fraction of a second), in zones with whole, half and
// quarter-hour offsets, both hemispheres, with and without daylight saving, and the zones
// whose short names en-US spells out. Instants before 1970 appear in UTC only: the short
// zone names of earlier dates follow CLDR's history, which the runtime does not carry.
// Left out: zones whose name node 20's ICU replaces by an older one (Asia/Kathmandu is
// "Asia/Katmandu" there, Asia/Kolkata "Asia/Calcutta"); the runtime keeps the tz
// database's names, as V8 does since it follows Temporal (tests/intl_differential.rs).

var DATES = [
  Date.UTC(2014, 2, 5, 3, 4, 5, 7),
  Date.UTC(2014, 5, 25, 16, 5, 6, 123),
  Date.UTC(1999, 11, 31, 23, 59, 59, 999),
  Date.UTC(2000, 0, 1, 0, 0, 0, 0),
  Date.UTC(2024, 1, 29, 12, 0, 0, 50),
  Date.UTC(2023, 2, 12, 6, 59, 59, 0),
  Date.UTC(2023, 2, 12, 7, 0, 0, 0),
  Date.UTC(2023, 9, 29, 0, 30, 0, 0),
  Date.UTC(2023, 9, 29, 1, 30, 0, 0),
  Date.UTC(2023, 10, 5, 5, 59, 0, 0),
  Date.UTC(2023, 10, 5, 6, 0, 0, 0),
  Date.UTC(2286, 10, 20, 17, 46, 40, 0),
];
var OLD_DATES = [-1e12, -62198755200000, Date.UTC(1969, 11, 31, 23, 59, 59, 999)];

var ZONES = ["UTC", "America/New_York", "Asia/Tokyo", "Europe/London", "Europe/Paris",
  "America/Los_Angeles", "America/Chicago", "America/Denver", "America/Phoenix",
  "America/Anchorage", "Pacific/Honolulu", "America/Adak", "America/Halifax",
  "America/Puerto_Rico", "America/Regina", "America/Mexico_City", "America/Toronto",
  "America/Havana", "Asia/Shanghai", "Asia/Jakarta", "Australia/Adelaide",
  "America/St_Johns", "Pacific/Chatham", "Africa/Casablanca", "Atlantic/Reykjavik",
  "Europe/Dublin", "America/Sao_Paulo", "Etc/GMT+5", "Etc/GMT-14", "Australia/Sydney"];

// Every supported shape of the date and of the time.
var DATE_SHAPES = [{}];
["numeric", "2-digit", undefined].forEach(function (year) {
  ["numeric", "2-digit", "narrow", "short", "long", undefined].forEach(function (month) {
    ["numeric", "2-digit", undefined].forEach(function (day) {
      var o = {};
      if (year) o.year = year;
      if (month) o.month = month;
      if (day) o.day = day;
      if (year && day && !month) return; // "2014 (day: 5)": refused here
      if (Object.keys(o).length) DATE_SHAPES.push(o);
    });
  });
});
["narrow", "short", "long"].forEach(function (weekday) {
  DATE_SHAPES.push({ weekday: weekday });
  DATE_SHAPES.push({ weekday: weekday, year: "numeric", month: "numeric", day: "numeric" });
  DATE_SHAPES.push({ weekday: weekday, month: "numeric", day: "2-digit" });
  DATE_SHAPES.push({ weekday: weekday, year: "numeric", month: "long", day: "numeric" });
  DATE_SHAPES.push({ weekday: weekday, month: "short", day: "numeric" });
});

var TIME_SHAPES = [];
[undefined, "h11", "h12", "h23", "h24"].forEach(function (hourCycle) {
  ["numeric", "2-digit", undefined].forEach(function (hour) {
    ["numeric", "2-digit", undefined].forEach(function (minute) {
      ["numeric", "2-digit", undefined].forEach(function (second) {
        if (hour && second && !minute) return; // "3 AM (second: 5)": refused here
        var o = {};
        if (hourCycle) o.hourCycle = hourCycle;
        if (hour) o.hour = hour;
        if (minute) o.minute = minute;
        if (second) o.second = second;
        if (hour || minute || second) TIME_SHAPES.push(o);
      });
    });
  });
});
[true, false].forEach(function (hour12) {
  TIME_SHAPES.push({ hour12: hour12, hour: "numeric" });
  TIME_SHAPES.push({ hour12: hour12, hour: "2-digit", minute: "2-digit", second: "2-digit" });
  TIME_SHAPES.push({ hour12: hour12, hourCycle: "h11", hour: "numeric", minute: "numeric" });
  TIME_SHAPES.push({ hour12: hour12, hourCycle: "h23", hour: "numeric", minute: "numeric" });
});
[1, 2, 3].forEach(function (digits) {
  TIME_SHAPES.push({ fractionalSecondDigits: digits });
  TIME_SHAPES.push({ second: "numeric", fractionalSecondDigits: digits });
  TIME_SHAPES.push({ minute: "2-digit", second: "2-digit", fractionalSecondDigits: digits });
  TIME_SHAPES.push({ hour: "numeric", minute: "2-digit", second: "2-digit", fractionalSecondDigits: digits });
});

var MIXED = [
  // what date-fns-tz asks for (its hour-cycle probe and its time zone offset reader)
  { hour12: false, year: "numeric", month: "numeric", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" },
  { hourCycle: "h23", year: "numeric", month: "numeric", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit" },
  { timeZoneName: "short" },
  { year: "numeric", month: "numeric", day: "numeric", hour: "numeric", minute: "numeric", second: "numeric" },
  { month: "short", day: "numeric", hour: "numeric", minute: "numeric" },
  { year: "numeric", month: "long", day: "numeric", hour: "numeric" },
  { weekday: "long", year: "numeric", month: "long", day: "numeric", hour: "numeric", minute: "numeric" },
  { weekday: "short", month: "numeric", day: "numeric", hour: "2-digit", minute: "2-digit", hourCycle: "h23" },
  { year: "2-digit", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit", fractionalSecondDigits: 3, hour12: false },
  { dateStyle: "short" }, { dateStyle: "medium" }, { dateStyle: "long" }, { dateStyle: "full" },
  { timeStyle: "short" }, { timeStyle: "medium" }, { timeStyle: "long" },
  { dateStyle: "short", timeStyle: "short" }, { dateStyle: "medium", timeStyle: "medium" },
  { dateStyle: "long", timeStyle: "long" }, { dateStyle: "full", timeStyle: "short" },
  { dateStyle: "short", timeStyle: "medium", hour12: false },
  { timeStyle: "short", hourCycle: "h23" }, { timeStyle: "medium", hourCycle: "h11" },
  { dateStyle: "medium", hour12: false },
];

var ZONE_NAMES = [
  { timeZoneName: "short" },
  { timeZoneName: "shortOffset" },
  { timeZoneName: "longOffset" },
  { hour: "numeric", minute: "2-digit", timeZoneName: "short" },
  { year: "numeric", month: "long", day: "numeric", timeZoneName: "short" },
  { weekday: "long", timeZoneName: "shortOffset" },
  { hour: "2-digit", minute: "2-digit", hourCycle: "h23", timeZoneName: "longOffset" },
  { dateStyle: "medium", timeStyle: "long" },
];

function fmt(options, zone, when) {
  var o = { timeZone: zone };
  for (var k in options) o[k] = options[k];
  var f = new Intl.DateTimeFormat("en-US", o);
  return [f.format(when), f.formatToParts(when), f.resolvedOptions()];
}

var CASES = [];
function add(options, zones, dates) {
  zones.forEach(function (zone) {
    dates.forEach(function (when) {
      CASES.push("fmt(" + JSON.stringify(options) + ", " + JSON.stringify(zone) + ", " + when + ")");
    });
  });
}
var SOME_ZONES = ["UTC", "America/New_York", "Australia/Adelaide"];
var SOME_DATES = [DATES[0], DATES[1], DATES[2], DATES[3]];
DATE_SHAPES.forEach(function (o) { add(o, SOME_ZONES, SOME_DATES); });
TIME_SHAPES.forEach(function (o) { add(o, SOME_ZONES, SOME_DATES); });
MIXED.forEach(function (o) { add(o, ["UTC", "America/New_York", "Australia/Adelaide"], DATES); });
// (not in 2286: Morocco's rules are listed only to 2087, and what comes after is each
// implementation's guess; the tz database's footer and ICU's differ there)
ZONE_NAMES.forEach(function (o) { add(o, ZONES, DATES.slice(0, -1)); });
add({}, ["UTC"], OLD_DATES);
add({ year: "numeric", month: "short", day: "2-digit", hour: "numeric", minute: "2-digit", second: "2-digit" }, ["UTC"], OLD_DATES);
add({ hour: "numeric", timeZoneName: "longOffset" }, ["UTC", "America/New_York", "Asia/Tokyo"], OLD_DATES.slice(0, 1));

// Construction and the other entry points.
CASES.push(
  'new Intl.DateTimeFormat().resolvedOptions()',
  'new Intl.DateTimeFormat("en-US", { timeZone: "asia/tokyo" }).resolvedOptions().timeZone',
  'new Intl.DateTimeFormat("en-US", { timeZone: "america/NEW_YORK" }).resolvedOptions().timeZone',
  'new Intl.DateTimeFormat("en-US", { timeZone: "Etc/UTC" }).resolvedOptions().timeZone',
  'new Intl.DateTimeFormat("en-US", { timeZone: "GMT" }).resolvedOptions().timeZone',
  'new Intl.DateTimeFormat("en-US", { timeZone: "Zulu" }).resolvedOptions().timeZone',
  'new Intl.DateTimeFormat("en-US", { timeZone: "Mars/Olympus_Mons" })',
  'new Intl.DateTimeFormat("en-US", { timeZone: "" })',
  'new Intl.DateTimeFormat("en-US", { month: "longer" })',
  'new Intl.DateTimeFormat("en-US", { hourCycle: "h25" })',
  'new Intl.DateTimeFormat("en-US", { fractionalSecondDigits: 4 })',
  'new Intl.DateTimeFormat("en-US", { fractionalSecondDigits: 0 })',
  'new Intl.DateTimeFormat("en-US", { dateStyle: "short", hour: "numeric" })',
  'new Intl.DateTimeFormat("en-US", { timeStyle: "short", year: "numeric" })',
  'new Intl.DateTimeFormat("en-US", { dateStyle: "short", timeZoneName: "short" })',
  'new Intl.DateTimeFormat("en-US", { dateStyle: "tiny" })',
  'Intl.DateTimeFormat("en-US", { timeZone: "UTC" }).format(0)',
  'Intl.DateTimeFormat("en-US", { timeZone: "UTC" }) instanceof Intl.DateTimeFormat',
  'new Intl.DateTimeFormat(["en-US"], { timeZone: "UTC" }).format(86400000)',
  'new Intl.DateTimeFormat("en", { timeZone: "UTC" }).resolvedOptions().locale',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC" }).format(new Date(Date.UTC(2020, 0, 2)))',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC" }).format(NaN)',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC" }).format(8.64e15 + 1)',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC" }).format("12345")',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC" }).format(-0)',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC" }).format(1.9)',
  '[new Intl.DateTimeFormat("en-US", { timeZone: "UTC" })].map(function (f) { var g = f.format; return g(0); })[0]',
  'typeof new Intl.DateTimeFormat("en-US").format',
  'new Intl.DateTimeFormat("en-US").format === new Intl.DateTimeFormat("en-US").format',
  '(function () { var f = new Intl.DateTimeFormat("en-US"); return f.format === f.format; })()',
  'Object.prototype.toString.call(new Intl.DateTimeFormat("en-US"))',
  'Object.prototype.toString.call(Intl)',
  'Intl.DateTimeFormat.prototype.formatToParts.call({}, 0)',
  'Intl.DateTimeFormat.supportedLocalesOf(["en-US", "en"])',
  'Intl.getCanonicalLocales("en-US")',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC", hour: "numeric", hour12: true, hourCycle: "h23" }).resolvedOptions()',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC", hour12: false }).resolvedOptions()',
  'new Intl.DateTimeFormat("en-US", { timeZone: "UTC", timeZoneName: "short" }).resolvedOptions()'
);

// Date.prototype.toLocaleString and its two siblings, which format through DateTimeFormat.
var D1 = "new Date(" + DATES[1] + ")";
[
  "", '"en-US"', '"en-US", { timeZone: "America/New_York" }', '"en-US", { timeZone: "Asia/Tokyo", hour12: false }',
  'undefined, { timeZone: "Australia/Adelaide", timeZoneName: "short" }', '"en-US", { hour: "numeric" }',
  '"en-US", { month: "long", day: "numeric" }', '"en-US", { dateStyle: "medium" }', '"en-US", { timeStyle: "short", timeZone: "Europe/Paris" }',
  '"en-US", { weekday: "long" }', '"en-US", { second: "numeric", fractionalSecondDigits: 2 }',
].forEach(function (args) {
  ["toLocaleString", "toLocaleDateString", "toLocaleTimeString"].forEach(function (method) {
    CASES.push(D1 + "." + method + "(" + args + ")");
  });
});
CASES.push(
  'new Date(NaN).toLocaleString()',
  'new Date(NaN).toLocaleDateString("en-US", { timeZone: "Mars/Olympus_Mons" })',
  'Date.prototype.toLocaleString.call({})',
  'Date.prototype.toLocaleDateString.call(0)',
  D1 + '.toLocaleDateString("en-US", { timeStyle: "short" })',
  D1 + '.toLocaleTimeString("en-US", { dateStyle: "short" })',
  D1 + '.toLocaleString("en-US", { timeZone: "Mars/Olympus_Mons" })',
  'Date.prototype.toLocaleString.length',
  'Date.prototype.toLocaleTimeString.name'
);

function serError(e) {
  return (e && e.constructor ? e.constructor.name : typeof e) + ": " + (e && e.message);
}

// One case per promise job (as the ethers cases run), so that nothing of one case's
// evaluation stays on the engine's stack into the next.
function runAll() {
  var out = [];
  var i = 0;
  function next() {
    if (i >= CASES.length) return Promise.resolve(JSON.stringify(out));
    var c = CASES[i++];
    try {
      out.push(JSON.stringify((0, eval)(c)));
    } catch (e) {
      out.push("throw:" + serError(e));
    }
    return Promise.resolve().then(next);
  }
  return next();
}
