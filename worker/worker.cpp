// thindist-worker compiles ThinLTO backend jobs one after another in one
// process, each as the job's own clang would: clang's driver turns the job's
// argv into the cc1 invocation in-process, and cc1 runs in-process too, as
// clang does by default. See docs/worker.md for the design and protocol.
//
// Usage:
//   thindist-worker --probe CLANG   print the version and resource directory
//                                   this build would use for CLANG
//   thindist-worker --serve         run jobs read from stdin (protocol below)
//
// Protocol: every message is a u32 count of strings, then each string as a
// u32 length and its bytes (little-endian). A job is
//   [dir, argc, argv..., env...]
// and its answer is one of
//   ["done", exit status, peak RSS in KiB, CPU in microseconds, stdout, stderr]
//   ["decline", reason]   the job was not started; run it elsewhere
// A job that crashes or calls exit() ends the worker: the caller reruns it.

#include "clang/Basic/Diagnostic.h"
#include "clang/Basic/DiagnosticFrontend.h"
#include "clang/Basic/DiagnosticOptions.h"
#include "clang/Basic/Stack.h"
#include "clang/Basic/Version.h"
#include "clang/CodeGen/ObjectFilePCHContainerWriter.h"
#include "clang/Config/config.h"
#include "clang/Driver/Compilation.h"
#include "clang/Driver/Driver.h"
#include "clang/Driver/ToolChain.h"
#include "clang/Frontend/ChainedDiagnosticConsumer.h"
#include "clang/Frontend/CompilerInstance.h"
#include "clang/Frontend/CompilerInvocation.h"
#include "clang/Frontend/SerializedDiagnosticPrinter.h"
#include "clang/Frontend/TextDiagnosticBuffer.h"
#include "clang/Frontend/TextDiagnosticPrinter.h"
#include "clang/FrontendTool/Utils.h"
#include "clang/Options/OptionUtils.h"
#include "clang/Options/Options.h"
#include "clang/Serialization/ObjectFilePCHContainerReader.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Option/ArgList.h"
#include "llvm/Support/BuryPointer.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/ErrorHandling.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Signals.h"
#include "llvm/Support/StringSaver.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/Timer.h"
#include "llvm/Support/VirtualFileSystem.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/TargetParser/Host.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <map>
#include <malloc.h>
#include <poll.h>
#include <string>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>
#include <vector>

using namespace clang;
using namespace clang::driver;

namespace {

// ---- framing ---------------------------------------------------------------

// Reader reads the requests, a buffer at a time: a request is one read,
// not two for each of its strings.
class Reader {
public:
  explicit Reader(int fd) : fd(fd) {}

  bool readFull(void *dst, size_t n) {
    char *p = static_cast<char *>(dst);
    while (n > 0) {
      if (pos == end) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r <= 0)
          return false;
        pos = 0;
        end = r;
      }
      size_t k = std::min(n, end - pos);
      memcpy(p, buf + pos, k);
      pos += k;
      p += k;
      n -= k;
    }
    return true;
  }

  // waitReadable says whether a read would find bytes within timeoutMs:
  // some already buffered, or the descriptor readable (or at its end, or
  // in error: the read then says so).
  bool waitReadable(int timeoutMs) {
    if (pos < end)
      return true;
    pollfd p = {fd, POLLIN, 0};
    return poll(&p, 1, timeoutMs) != 0;
  }

private:
  int fd;
  char buf[64 << 10];
  size_t pos = 0, end = 0;
};

bool writeFull(int fd, const void *buf, size_t n) {
  const char *p = static_cast<const char *>(buf);
  while (n > 0) {
    ssize_t w = write(fd, p, n);
    if (w <= 0)
      return false;
    p += w;
    n -= w;
  }
  return true;
}

bool readU32(Reader &in, uint32_t &v) {
  unsigned char b[4];
  if (!in.readFull(b, 4))
    return false;
  v = b[0] | b[1] << 8 | b[2] << 16 | uint32_t(b[3]) << 24;
  return true;
}

void putU32(std::string &out, uint32_t v) {
  for (int i = 0; i < 4; i++)
    out.push_back(char(v >> (8 * i)));
}

bool readMessage(Reader &in, std::vector<std::string> &fields) {
  uint32_t n;
  if (!readU32(in, n))
    return false;
  fields.assign(n, std::string());
  for (std::string &f : fields) {
    uint32_t len;
    if (!readU32(in, len))
      return false;
    f.resize(len);
    if (len > 0 && !in.readFull(&f[0], len))
      return false;
  }
  return true;
}

bool writeMessage(int fd, const std::vector<std::string> &fields) {
  std::string out;
  putU32(out, fields.size());
  for (const std::string &f : fields) {
    putU32(out, f.size());
    out += f;
  }
  return writeFull(fd, out.data(), out.size());
}

// ---- one job ---------------------------------------------------------------

// The path clang's driver would find for itself: with canonical prefixes
// (the default) the kernel's path of the running binary, which is argv[0]
// looked up in PATH and resolved; without them, argv[0] or its PATH match.
std::string executablePath(const char *argv0, bool canonical) {
  llvm::SmallString<256> path(argv0);
  if (!canonical || !llvm::StringRef(argv0).contains('/')) {
    if (!llvm::sys::fs::exists(path))
      if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName(argv0))
        path = *p;
    if (!canonical)
      return std::string(path);
  }
  llvm::SmallString<256> real;
  if (llvm::sys::fs::real_path(path, real))
    return std::string(path);
  return std::string(real);
}

// The clang executable of the running job, for cc1's resource directory
// when the driver gave none (it always does).
std::string jobClang;

void fatalErrorHandler(void *userData, const char *message, bool genCrashDiag) {
  auto &diags = *static_cast<DiagnosticsEngine *>(userData);
  diags.Report(diag::err_fe_error_backend) << message;
  llvm::sys::RunInterruptHandlers();
  // As clang: the process ends, so the caller reruns the job elsewhere.
  llvm::sys::Process::Exit(genCrashDiag ? 70 : 1);
}

// runCC1 is what clang's in-process cc1 does with the driver's cc1 argv.
int runCC1(llvm::SmallVectorImpl<const char *> &argv) {
  // The options are global and the driver may have counted some of them.
  llvm::cl::ResetAllOptionOccurrences();
  llvm::BumpPtrAllocator alloc;
  llvm::cl::ExpansionContext ectx(alloc, llvm::cl::TokenizeGNUCommandLine);
  if (llvm::Error err = ectx.expandResponseFiles(argv)) {
    llvm::errs() << toString(std::move(err)) << '\n';
    return 1;
  }
  llvm::StringRef tool = argv[1];
  if (tool != "-cc1") {
    llvm::errs() << "error: unknown integrated tool '" << tool << "'. "
                 << "Valid tools include '-cc1', '-cc1as' and '-cc1gen-reproducer'.\n";
    return 1;
  }
  llvm::ArrayRef<const char *> args = llvm::ArrayRef(argv).slice(2);

  auto pchOps = std::make_shared<PCHContainerOperations>();
  pchOps->registerWriter(std::make_unique<ObjectFilePCHContainerWriter>());
  pchOps->registerReader(std::make_unique<ObjectFilePCHContainerReader>());

  DiagnosticOptions diagOpts;
  auto *buffer = new TextDiagnosticBuffer;
  DiagnosticsEngine diags(DiagnosticIDs::create(), diagOpts, buffer);
  auto invocation = std::make_shared<CompilerInvocation>();
  bool ok = CompilerInvocation::CreateFromArgs(*invocation, args, diags, argv[0]);
  auto ci = std::make_unique<CompilerInstance>(std::move(invocation), std::move(pchOps));
  // -disable-free (the driver always passes it) only saves a short-lived
  // clang its teardown; a worker frees each job's memory before the next.
  ci->getFrontendOpts().DisableFree = false;
  ci->getCodeGenOpts().DisableFree = false;
  if (ci->getHeaderSearchOpts().UseBuiltinIncludes && ci->getHeaderSearchOpts().ResourceDir.empty())
    ci->getHeaderSearchOpts().ResourceDir = GetResourcesPath(jobClang);
  ci->createVirtualFileSystem(llvm::vfs::getRealFileSystem(), buffer);
  ci->createDiagnostics();
  llvm::install_fatal_error_handler(fatalErrorHandler, &ci->getDiagnostics());
  buffer->FlushDiagnostics(ci->getDiagnostics());
  if (ok)
    ok = ExecuteCompilerInvocation(ci.get());
  llvm::remove_fatal_error_handler();
  llvm::TimerGroup::printAll(llvm::errs());
  llvm::TimerGroup::clearAll();
  return !ok;
}

// A job's shape is its driver command line with its input, output and
// index taken out, in its directory, with its environment and compiler:
// the jobs of one link differ in those three paths alone. The driver's cc1
// command line for a shape, those paths marked in it, is kept once the
// real driver has made exactly it, paths put in, for confirmations more
// jobs of the shape; from then on a job of the shape goes to cc1 with it,
// without the driver. A shape whose driver printed anything, ran other
// than one in-process cc1, or made another command line than the kept one
// always runs the driver.
struct Shape {
  std::vector<std::string> cc1; // marked: "\x01" N "\x01" for value N
  int confirmed = 0;
  bool bad = false;
};
std::map<std::string, Shape> shapes;
constexpr int confirmations = 2;

std::string mark(std::string arg, const std::vector<std::string> &values);

// shapeOf returns the key of a driver command line's shape and its
// values (input, output, index, the input's file name), or false when it
// has none: not one input and an output, or arguments read from a file
// (a response file, --config).
bool shapeOf(const llvm::SmallVectorImpl<const char *> &args, const llvm::opt::InputArgList &list,
             const std::string &clang, std::string &key, std::vector<std::string> &values) {
  std::vector<std::string> inputs;
  for (const llvm::opt::Arg *a : list.filtered(options::OPT_INPUT))
    inputs.push_back(a->getValue());
  std::string output = list.getLastArgValue(options::OPT_o).str();
  if (inputs.size() != 1 || output.empty() || getenv("CCC_OVERRIDE_OPTIONS"))
    return false;
  values = {inputs[0], output, list.getLastArgValue(options::OPT_fthinlto_index_EQ).str(),
            llvm::sys::path::filename(inputs[0]).str()};
  key.clear();
  for (size_t i = 0; i < args.size(); i++) {
    if (!args[i])
      return false;
    llvm::StringRef a(args[i]);
    if (a.starts_with("@") || a.starts_with("--config"))
      return false; // the driver reads files whose content is no part of the key
    key += i == 0 ? std::string(a) : mark(std::string(a), values);
    key += '\0';
  }
  char cwd[4096];
  if (!getcwd(cwd, sizeof cwd))
    return false;
  key += std::string("\x02") + cwd + '\0' + clang + '\0';
  // Which values lie in which (an input without a directory is its file
  // name): marks are placed by it, so jobs that differ in it differ in
  // shape.
  for (size_t i = 0; i < values.size(); i++)
    for (size_t j = 0; j < values.size(); j++)
      if (i != j && !values[i].empty() && values[j].find(values[i]) != std::string::npos)
        key += {char('0' + i), char('0' + j), ' '};
  for (char **e = environ; *e; e++) {
    key += *e;
    key += '\0';
  }
  return true;
}

// mark replaces the values in arg with their marks, the longest first (so
// that a file name inside a path goes with the path).
std::string mark(std::string arg, const std::vector<std::string> &values) {
  std::vector<size_t> order;
  for (size_t i = 0; i < values.size(); i++)
    if (!values[i].empty())
      order.push_back(i);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return values[a].size() != values[b].size() ? values[a].size() > values[b].size() : a < b;
  });
  for (size_t i : order) {
    std::string m = std::string("\x01") + char('0' + i) + "\x01";
    for (size_t at = arg.find(values[i]); at != std::string::npos; at = arg.find(values[i], at + m.size()))
      arg.replace(at, values[i].size(), m);
  }
  return arg;
}

// unmark puts values in for the marks of a kept command line.
std::vector<std::string> unmark(const std::vector<std::string> &marked, const std::vector<std::string> &values) {
  std::vector<std::string> out;
  for (const std::string &a : marked) {
    std::string r;
    for (size_t i = 0; i < a.size(); i++) {
      if (a[i] == '\x01' && i + 2 < a.size() && a[i + 2] == '\x01') {
        r += values[a[i + 1] - '0'];
        i += 2;
      } else {
        r += a[i];
      }
    }
    out.push_back(r);
  }
  return out;
}

// What the real driver did, seen from cc1: its command lines, and whether
// the driver had printed anything before.
std::vector<std::vector<std::string>> ranCC1;
bool printedBeforeCC1;

int captureCC1(llvm::SmallVectorImpl<const char *> &argv) {
  ranCC1.emplace_back(argv.begin(), argv.end());
  llvm::outs().flush();
  fflush(stdout);
  if (lseek(2, 0, SEEK_END) > 0 || lseek(1, 0, SEEK_END) > 0)
    printedBeforeCC1 = true;
  return runCC1(argv);
}

// learn keeps or checks the shape key's cc1 command line after the real
// driver ran a job of it.
void learn(const std::string &key, const std::vector<std::string> &values, int status) {
  bool fit = status == 0 && ranCC1.size() == 1 && !printedBeforeCC1;
  auto it = shapes.find(key);
  if (it == shapes.end()) {
    Shape sh;
    sh.bad = !fit;
    if (fit)
      for (const std::string &a : ranCC1[0])
        sh.cc1.push_back(mark(a, values));
    shapes.emplace(key, std::move(sh));
    return;
  }
  Shape &sh = it->second;
  if (sh.bad)
    return;
  if (fit && unmark(sh.cc1, values) == ranCC1[0])
    sh.confirmed++;
  else
    sh.bad = true;
}

// runDriver is clang's main for a driver command line, cc1 in-process.
int runDriver(std::vector<const char *> argvIn) {
  llvm::SmallVector<const char *, 256> args(argvIn.begin(), argvIn.end());
  const char *progName = args[0];
  llvm::BumpPtrAllocator alloc;
  auto vfs = llvm::vfs::getRealFileSystem();
  bool clMode = IsClangCL(getDriverMode(progName, llvm::ArrayRef(args).slice(1)));
  if (llvm::Error err = expandResponseFiles(args, clMode, alloc, vfs.get())) {
    llvm::errs() << toString(std::move(err)) << '\n';
    return 1;
  }
  bool canonical = true;
  for (size_t i = 1; i < args.size(); i++) {
    if (args[i] == nullptr)
      continue;
    if (llvm::StringRef(args[i]) == "-canonical-prefixes")
      canonical = true;
    else if (llvm::StringRef(args[i]) == "-no-canonical-prefixes")
      canonical = false;
  }
  llvm::StringSet<> saved;
  if (const char *override = getenv("CCC_OVERRIDE_OPTIONS"))
    applyOverrideOptions(args, override, saved, "CCC_OVERRIDE_OPTIONS", &llvm::errs());
  std::string path = executablePath(progName, canonical);
  jobClang = path;

  unsigned missingIndex, missingCount;
  llvm::opt::InputArgList argList =
      getDriverOptTable().ParseArgs(llvm::ArrayRef(args).slice(1), missingIndex, missingCount);
  std::string key;
  std::vector<std::string> values;
  bool shaped = shapeOf(args, argList, path, key, values);
  if (shaped) {
    auto it = shapes.find(key);
    if (it != shapes.end() && !it->second.bad && it->second.confirmed >= confirmations) {
      std::vector<std::string> cc1 = unmark(it->second.cc1, values);
      llvm::SmallVector<const char *, 256> cargv;
      for (const std::string &a : cc1)
        cargv.push_back(a.c_str());
      int res = runCC1(cargv);
      llvm::TimerGroup::printAll(llvm::errs());
      llvm::TimerGroup::clearAll();
      return res;
    }
  }
  ranCC1.clear();
  printedBeforeCC1 = false;
  std::unique_ptr<DiagnosticOptions> diagOpts = CreateAndPopulateDiagOpts(args);
  diagOpts->DiagnosticSuppressionMappingsFile.clear();
  auto *printer = new TextDiagnosticPrinter(llvm::errs(), *diagOpts);
  llvm::StringRef stem = llvm::sys::path::stem(progName);
  printer->setPrefix(stem.equals_insensitive("cl") ? "clang-cl" : stem.str());
  DiagnosticsEngine diags(DiagnosticIDs::create(), *diagOpts, printer);
  bool newProcess = argList.hasFlag(options::OPT_fno_integrated_cc1, options::OPT_fintegrated_cc1, CLANG_SPAWN_CC1);
  if (!diagOpts->DiagnosticSerializationFile.empty())
    diags.setClient(new ChainedDiagnosticConsumer(
        diags.takeClient(),
        serialized_diags::create(diagOpts->DiagnosticSerializationFile, *diagOpts, true)));
  ProcessWarningOptions(diags, *diagOpts, *vfs, /*ReportDiags=*/false);

  Driver driver(path, llvm::sys::getDefaultTargetTriple(), diags, "clang LLVM compiler", vfs);
  ParsedClangName nameParts = ToolChain::getTargetAndModeFromProgramName(progName);
  driver.setTargetAndMode(nameParts);
  // As clang: the target and mode the name implies go right after argv[0].
  if (nameParts.DriverMode)
    args.insert(args.begin() + 1, saved.insert(nameParts.DriverMode).first->getKeyData());
  if (nameParts.TargetIsValid) {
    const char *target[] = {"-target", saved.insert(nameParts.TargetPrefix).first->getKeyData()};
    args.insert(args.begin() + 1, std::begin(target), std::end(target));
  }
  if (!newProcess)
    driver.CC1Main = captureCC1;

  std::unique_ptr<Compilation> c(driver.BuildCompilation(args));
  int res = 1;
  Driver::CommandStatus status = Driver::CommandStatus::Ok;
  const Command *failing = c->getJobs().empty() ? nullptr : &*c->getJobs().begin();
  if (!c->containsError()) {
    llvm::SmallVector<std::pair<int, const Command *>, 4> failures;
    res = driver.ExecuteCompilation(*c, failures);
    for (const auto &f : failures) {
      if (!res)
        res = f.first;
      failing = f.second;
      status = Driver::CommandStatus::Error;
    }
  }
  if (failing && driver.maybeGenerateCompilationDiagnostics(status, Driver::ReproLevel::OnCrash, *c, *failing))
    res = 1;
  diags.getClient()->finish();
  llvm::TimerGroup::printAll(llvm::errs());
  llvm::TimerGroup::clearAll();
  if (shaped)
    learn(key, values, res);
  return res;
}

// What the worker does not do as clang would: the job is run elsewhere.
const char *declineReason(const std::vector<std::string> &argv, const std::vector<std::string> &env) {
  if (argv.size() < 2)
    return "no arguments";
  if (llvm::StringRef(argv[1]).starts_with("-cc1"))
    return "a -cc1 command line";
  for (const std::string &e : env)
    for (const char *name : {"CC_PRINT_", "CC_LOG_DIAGNOSTICS", "FORCE_CLANG_DIAGNOSTICS_CRASH"})
      if (llvm::StringRef(e).starts_with(name))
        return "clang's debugging environment variables";
  for (const std::string &a : argv)
    if (llvm::StringRef(a).starts_with("-gen-reproducer") || llvm::StringRef(a).starts_with("-fcrash-diagnostics"))
      return "crash reproducer options";
  return nullptr;
}

int memfd() { return memfd_create("thindist-worker", MFD_CLOEXEC); }

std::string drain(int fd) {
  std::string s;
  off_t n = lseek(fd, 0, SEEK_END);
  if (n > 0) {
    s.resize(n);
    if (pread(fd, &s[0], n, 0) != n)
      s.clear();
  }
  close(fd);
  return s;
}

long cpuMicros() {
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000L + ru.ru_utime.tv_usec + ru.ru_stime.tv_usec;
}

std::vector<std::string> serveOne(const std::vector<std::string> &req) {
  if (req.size() < 2)
    return {"decline", "malformed request"};
  size_t argc = std::strtoul(req[1].c_str(), nullptr, 10);
  if (argc + 2 > req.size())
    return {"decline", "malformed request"};
  std::vector<std::string> argv(req.begin() + 2, req.begin() + 2 + argc);
  std::vector<std::string> env(req.begin() + 2 + argc, req.end());
  if (const char *why = declineReason(argv, env))
    return {"decline", why};
  if (chdir(req[0].c_str()) != 0)
    return {"decline", std::string("cannot enter ") + req[0] + ": " + strerror(errno)};
  clearenv();
  for (const std::string &e : env) {
    size_t eq = e.find('=');
    if (eq != std::string::npos && eq > 0)
      setenv(e.substr(0, eq).c_str(), e.c_str() + eq + 1, 1);
  }
  int out = memfd(), err = memfd();
  if (out < 0 || err < 0 || dup2(out, 1) < 0 || dup2(err, 2) < 0)
    return {"decline", std::string("cannot capture output: ") + strerror(errno)};
  std::vector<const char *> cargv;
  for (const std::string &a : argv)
    cargv.push_back(a.c_str());
  long cpu0 = cpuMicros();
  int status = runDriver(cargv);
  llvm::outs().flush();
  fflush(stdout);
  fflush(stderr);
  long cpu = cpuMicros() - cpu0;
  rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  // fds 1 and 2 keep pointing at the job's files until the next job.
  return {"done", std::to_string(status), std::to_string(ru.ru_maxrss), std::to_string(cpu), drain(out), drain(err)};
}

// How long a worker waits for its next job before it trims its heap:
// well beyond the time a link with jobs left takes to hand it the next.
constexpr int idleTrimMs = 20;

int serve() {
  // The protocol keeps its own descriptors; fds 0-2 are the jobs'.
  int in = dup(0), out = dup(1);
  int null = open("/dev/null", O_RDONLY);
  if (in < 0 || out < 0 || null < 0 || dup2(null, 0) < 0)
    return 1;
  close(null);
  Reader reader(in);
  std::vector<std::string> req;
  while (true) {
    // A worker with no next job gives the heap its jobs left free back to
    // the system (glibc keeps it in its arenas), so that an idle worker,
    // kept for the next link, holds little more than a fresh one. One
    // whose next job comes at once keeps it: the job reuses those pages
    // without faulting them in again, and the link does not wait for the
    // trim.
    if (!reader.waitReadable(idleTrimMs))
      malloc_trim(0);
    if (!readMessage(reader, req))
      return 0;
    if (!writeMessage(out, serveOne(req)))
      return 1;
  }
}

int probe(const char *clang) {
  std::string path = executablePath(clang, true);
  DiagnosticOptions diagOpts;
  DiagnosticsEngine diags(DiagnosticIDs::create(), diagOpts, new IgnoringDiagConsumer);
  Driver driver(path, llvm::sys::getDefaultTargetTriple(), diags);
  llvm::outs() << getClangFullVersion() << '\n' << driver.ResourceDir << '\n';
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  noteBottomOfStack();
  llvm::InitializeAllTargets();
  llvm::InitializeAllTargetMCs();
  llvm::InitializeAllAsmPrinters();
  llvm::InitializeAllAsmParsers();
  if (argc == 3 && llvm::StringRef(argv[1]) == "--probe")
    return probe(argv[2]);
  if (argc == 2 && llvm::StringRef(argv[1]) == "--serve")
    return serve();
  fprintf(stderr, "usage: thindist-worker --serve | --probe CLANG\n");
  return 2;
}
