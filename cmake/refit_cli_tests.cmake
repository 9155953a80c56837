# CLI tests of `shardwise refit` (mpirun -np 6, 3 and 2) and `shardwise reshard` (offline TP
# export), driven by tests/cli/refit_cli_test.sh. Included from the top-level CMakeLists.txt.
if(TARGET shardwise)
  add_test(NAME cli_refit
           COMMAND ${CMAKE_COMMAND} -E env ${SHARDWISE_MPIEXEC_ENV}
                   bash ${PROJECT_SOURCE_DIR}/tests/cli/refit_cli_test.sh $<TARGET_FILE:shardwise>
                   ${PROJECT_SOURCE_DIR} ${MPIEXEC_EXECUTABLE})
  set_tests_properties(cli_refit PROPERTIES LABELS "cli;mpi" TIMEOUT 600)
endif()
