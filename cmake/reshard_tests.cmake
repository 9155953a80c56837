# The reshard executor tests also run under mpirun -np 6 (disjoint 4 -> 2 rank sets, TP6 tiles),
# with the same environment as the np 2 / np 4 runs of shardwise_layer().
if(TARGET test_reshard_mpi)
  add_test(NAME reshard_mpi_np6
           COMMAND ${CMAKE_COMMAND} -E env ${SHARDWISE_MPIEXEC_ENV}
                   ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} 6 --oversubscribe
                   $<TARGET_FILE:test_reshard_mpi>)
  set_tests_properties(reshard_mpi_np6 PROPERTIES LABELS mpi TIMEOUT 300)
endif()
