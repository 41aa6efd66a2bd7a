-- A smoke test of a lua5.4 build: every library the interpreter links
-- (base, string, table, math, coroutine, utf8, os, io, debug, load) is
-- exercised, each result is checked with assert, and everything printed is
-- deterministic (no addresses, no hash order, no clock), so two builds can be
-- compared line by line. Debian's source package carries no test suite.
local checks = 0
local function check(cond, what)
  assert(cond, what)
  checks = checks + 1
end
local function sorted_keys(t)
  local ks = {}
  for k in pairs(t) do ks[#ks + 1] = k end
  table.sort(ks, function(a, b) return tostring(a) < tostring(b) end)
  return ks
end

-- strings
local s = "The quick brown fox jumps over the lazy dog"
check(#s == 43, "length")
check(s:upper():sub(5, 9) == "QUICK", "upper/sub")
check(select(2, s:gsub("o", "0")) == 4, "gsub count")
local words = {}
for w in s:gmatch("%a+") do words[#words + 1] = w:lower() end
check(#words == 9, "gmatch")
table.sort(words)
print("words:", table.concat(words, ","))
check(("%5.2f|%-5d|%x|%q"):format(math.pi, 42, 255, "a\nb") == ' 3.14|42   |ff|"a\\\nb"', "format")
print(string.format("fmt: %d %s %g %e %08.3f %c", -7, "str", 1e20, 12345.678, -3.14159, 65))
check(string.rep("ab", 3, "-") == "ab-ab-ab", "rep")
check(("hello"):reverse() == "olleh", "reverse")
check(string.find("a+b=c", "+", 1, true) == 2, "plain find")
check(("key = value"):match("^(%w+)%s*=%s*(%w+)$") == "key", "match")
local packed = string.pack("<i4 d s1", -2, 0.5, "xyz")
local a, b, c = string.unpack("<i4 d s1", packed)
check(a == -2 and b == 0.5 and c == "xyz" and #packed == 16, "pack/unpack")
print("bytes:", string.byte("Lua", 1, -1))

-- tables
local t = {}
for i = 1, 1000 do t[i] = (i * 7919) % 1000 end
table.sort(t)
check(t[1] == 0 and t[1000] == 999, "sort")
table.insert(t, 1, -1)
check(table.remove(t) == 999 and t[1] == -1 and #t == 1000, "insert/remove")
check(table.concat(table.move({1, 2, 3}, 1, 3, 2, {0}), " ") == "0 1 2 3", "move")
check(select("#", table.unpack({1, nil, 3}, 1, 3)) == 3, "unpack")
local set = {}
for _, w in ipairs(words) do set[w] = (set[w] or 0) + 1 end
local parts = {}
for _, k in ipairs(sorted_keys(set)) do parts[#parts + 1] = k .. "=" .. set[k] end
print("set:", table.concat(parts, " "))

-- metatables
local Vec = {}
Vec.__index = Vec
Vec.__add = function(p, q) return setmetatable({x = p.x + q.x, y = p.y + q.y}, Vec) end
Vec.__eq = function(p, q) return p.x == q.x and p.y == q.y end
Vec.__tostring = function(p) return ("(%g,%g)"):format(p.x, p.y) end
Vec.__len = function(p) return math.sqrt(p.x * p.x + p.y * p.y) end
local function vec(x, y) return setmetatable({x = x, y = y}, Vec) end
check(vec(1, 2) + vec(2, 2) == vec(3, 4), "__add/__eq")
check(#vec(3, 4) == 5, "__len")
print("vec:", tostring(vec(1.5, -2) + vec(0.5, 2)))
local log = {}
local proxy = setmetatable({}, {__newindex = function(_, k, v) log[#log + 1] = k .. ":" .. tostring(v) end})
proxy.a = 1; proxy.b = true
check(table.concat(log, ",") == "a:1,b:true", "__newindex")
local weak = setmetatable({}, {__mode = "k"})
weak[{}] = 1
collectgarbage()
check(next(weak) == nil, "weak table collected")

-- closures
local function counter()
  local n = 0
  return function(d) n = n + (d or 1); return n end
end
local c1, c2 = counter(), counter()
c1(); c1(5); c2()
check(c1() == 7 and c2() == 2, "closures")
local fns = {}
for i = 1, 5 do fns[i] = function() return i * i end end
check(fns[3]() == 9 and fns[5]() == 25, "loop closures")
local function fib(n) if n < 2 then return n end return fib(n - 1) + fib(n - 2) end
check(fib(25) == 75025, "recursion")
local function sum(...) local r = 0 for _, v in ipairs({...}) do r = r + v end return r, select("#", ...) end
local total, count = sum(1, 2, 3, 4)
check(total == 10 and count == 4, "varargs")

-- coroutines
local gen = coroutine.wrap(function()
  for i = 1, 3 do coroutine.yield(i) end
  return "done"
end)
check(gen() == 1 and gen() == 2 and gen() == 3 and gen() == "done", "wrap")
local co = coroutine.create(function(x, y)
  local z = coroutine.yield(x + y)
  local w = coroutine.yield(z * 2)
  return w .. "!"
end)
local ok1, v1 = coroutine.resume(co, 1, 2)
local ok2, v2 = coroutine.resume(co, 10)
local ok3, v3 = coroutine.resume(co, "end")
check(ok1 and v1 == 3 and ok2 and v2 == 20 and ok3 and v3 == "end!", "resume/yield")
check(coroutine.status(co) == "dead", "status")
local bad = coroutine.create(function() error("boom") end)
local okb, eb = coroutine.resume(bad)
check(not okb and eb:find("boom"), "error in coroutine")
local function producer()
  return coroutine.wrap(function() for i = 1, 10 do coroutine.yield(i * i) end end)
end
local acc = {}
for v in producer() do acc[#acc + 1] = v end
print("squares:", table.concat(acc, " "))

-- math and integers
check(math.type(1) == "integer" and math.type(1.0) == "float", "math.type")
check(7 // 2 == 3 and -7 // 2 == -4 and 7 % -3 == -2 and 2^10 == 1024.0, "arith")
check(math.maxinteger + 1 == math.mininteger, "wraparound")
check(0x7f & 0x0f == 15 and 1 << 62 == 4611686018427387904 and ~0 == -1, "bitwise")
check(math.tointeger(3.0) == 3 and math.ult(1, -1), "tointeger/ult")
check(math.abs(math.sin(math.pi / 6) - 0.5) < 1e-12, "sin")
check(math.floor(-2.5) == -3 and math.ceil(-2.5) == -2 and math.fmod(7, 3) == 1, "floor/ceil/fmod")
math.randomseed(42)
local r = {}
for i = 1, 5 do r[i] = math.random(1, 100) end
print("random:", table.concat(r, " "))
print(string.format("math: %.10f %.10f %.10f %d", math.exp(1), math.log(1000, 10), math.sqrt(2), 10 // 3))
local primes = {}
for n = 2, 200 do
  local isp = true
  for d = 2, math.floor(math.sqrt(n)) do if n % d == 0 then isp = false break end end
  if isp then primes[#primes + 1] = n end
end
check(#primes == 46, "primes")
print("primes:", #primes, primes[#primes])

-- utf8
local u = "héllo wörld ∑"
check(utf8.len(u) == 13, "utf8.len")
local cps = {}
for _, cp in utf8.codes("aé∑") do cps[#cps + 1] = cp end
check(table.concat(cps, ",") == "97,233,8721", "utf8.codes")
check(utf8.char(72, 233, 8364) == "Hé€", "utf8.char")

-- errors, load, goto
local okp, err = pcall(function() error({code = 42}) end)
check(not okp and err.code == 42, "pcall table error")
local okx, msg = xpcall(function() local x = nil; return x.y end, function(m) return "handled: " .. m end)
check(not okx and msg:find("handled:") and msg:find("index"), "xpcall")
local chunk = load("local a, b = ... return a * b + 1")
check(chunk(6, 7) == 43, "load")
check(load("return +") == nil, "load syntax error")
local env = {x = 5}
check(load("return x * 2", "chunk", "t", env)() == 10, "load env")
local dumped = load(string.dump(function(n) return n * 3 end))
check(dumped(14) == 42, "dump/undump")
do
  local i, out = 1, {}
  ::top::
  out[#out + 1] = i
  i = i + 1
  if i <= 4 then goto top end
  check(table.concat(out) == "1234", "goto")
end
check(select(2, pcall(error, "plain", 0)) == "plain", "error level 0")

-- os, io, debug
check(type(os.time()) == "number" and os.getenv("THIS_VARIABLE_IS_NOT_SET") == nil, "os")
check(os.date("!%Y-%m-%d", 0) == "1970-01-01", "os.date")
local tmp = os.tmpname()
local f = assert(io.open(tmp, "w"))
f:write("line one\n", 2, "\n", 3.5, "\n")
f:close()
local lines = {}
for l in io.lines(tmp) do lines[#lines + 1] = l end
os.remove(tmp)
check(#lines == 3 and lines[1] == "line one" and tonumber(lines[3]) == 3.5, "io")
local info = debug.getinfo(fib, "S")
check(info.what == "Lua" and info.linedefined > 0, "debug.getinfo")
check(debug.traceback("tb"):find("stack traceback"), "traceback")

-- garbage collector under churn
local keep = {}
for i = 1, 20000 do
  local obj = {i, tostring(i), {i}}
  if i % 1000 == 0 then keep[#keep + 1] = obj end
end
collectgarbage("collect")
check(#keep == 20 and keep[20][2] == "20000", "gc")
check(collectgarbage("count") > 0, "gc count")

print(("smoke: all %d checks passed"):format(checks))
