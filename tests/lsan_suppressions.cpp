// Leak checking of a binary that initialises Open MPI (the ASan build runs unit tests with
// detect_leaks=1). Open MPI keeps allocations from MPI_Init alive past MPI_Finalize by design and
// unloads its plugins at finalize, which leaves their leak stacks unattributable. So this binary
// keeps plugins loaded, unwinds malloc stacks fully (Open MPI has no frame pointers), and
// suppresses leaks whose stack passes through Open MPI; shardwise's own allocations stay checked.
#include <cstdlib>

extern "C" const char* __lsan_default_suppressions();
extern "C" const char* __lsan_default_suppressions() {
  return "leak:libmpi.so\n"
         "leak:libopen-pal.so\n"
         "leak:libopen-rte.so\n"
         "leak:libpmix.so\n"
         "leak:libhwloc.so\n"
         "leak:libevent\n"
         "leak:mca_\n";
}

extern "C" const char* __asan_default_options();
extern "C" const char* __asan_default_options() { return "fast_unwind_on_malloc=0"; }

namespace {
// Before main, so before MPI_Init reads its parameters.
[[maybe_unused]] const int kKeepPluginsLoaded =
    ::setenv("OMPI_MCA_mca_base_component_disable_dlclose", "1", 0);
}  // namespace
