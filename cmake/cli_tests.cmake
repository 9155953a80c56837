# CLI tests: shell scripts under tests/cli/ that drive the built `shardwise` binary.
# Included from the top-level CMakeLists.txt when SHARDWISE_BUILD_APPS is on.
add_test(NAME cli_layout
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/layout_cli_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR}/examples/models)
set_tests_properties(cli_layout PROPERTIES LABELS cli TIMEOUT 120)
add_test(NAME cli_config
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/config_cli_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli_config PROPERTIES LABELS cli TIMEOUT 120)
add_test(NAME cli_train_faults
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/train_faults_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_train_faults PROPERTIES LABELS cli TIMEOUT 300)
add_test(NAME cli_text_corpus
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/text_corpus_cli_test.sh
                 $<TARGET_FILE:shardwise> ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_text_corpus PROPERTIES LABELS cli TIMEOUT 120)
add_test(NAME cli_train_comm_timeout
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/comm/train_comm_timeout_cli_test.sh
                 $<TARGET_FILE:shardwise> ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli_train_comm_timeout PROPERTIES LABELS cli TIMEOUT 180)
add_test(NAME cli_usability
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/usability_cli_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_usability PROPERTIES LABELS "cli;mpi" TIMEOUT 300)
add_test(NAME cli_tp
         COMMAND ${CMAKE_COMMAND} -E env ${SHARDWISE_MPIEXEC_ENV}
                 bash ${PROJECT_SOURCE_DIR}/tests/cli/tp_cli_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR} ${MPIEXEC_EXECUTABLE})
set_tests_properties(cli_tp PROPERTIES LABELS "cli;mpi" TIMEOUT 300)
add_test(NAME cli_file_faults
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/file_faults_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_file_faults PROPERTIES LABELS cli TIMEOUT 600)
add_test(NAME cli_parsers
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/parsers_cli_test.sh $<TARGET_FILE:shardwise>
                 ${PROJECT_SOURCE_DIR})
set_tests_properties(cli_parsers PROPERTIES LABELS cli TIMEOUT 120)
add_test(NAME cli_comm_timeout
         COMMAND ${CMAKE_COMMAND} -E env ${SHARDWISE_MPIEXEC_ENV}
                 bash ${PROJECT_SOURCE_DIR}/tests/cli/comm_timeout_cli_test.sh
                 $<TARGET_FILE:shardwise> ${PROJECT_SOURCE_DIR} ${MPIEXEC_EXECUTABLE})
set_tests_properties(cli_comm_timeout PROPERTIES LABELS "cli;mpi" TIMEOUT 300)
add_test(NAME cli_progress
         COMMAND ${CMAKE_COMMAND} -E env ${SHARDWISE_MPIEXEC_ENV}
                 bash ${PROJECT_SOURCE_DIR}/tests/cli/progress_cli_test.sh
                 $<TARGET_FILE:shardwise> ${PROJECT_SOURCE_DIR} ${MPIEXEC_EXECUTABLE})
set_tests_properties(cli_progress PROPERTIES LABELS "cli;mpi" TIMEOUT 300)
add_test(NAME cli_train_device
         COMMAND bash ${PROJECT_SOURCE_DIR}/tests/cli/train_device_cli_test.sh
                 $<TARGET_FILE:shardwise> ${PROJECT_SOURCE_DIR}/examples)
set_tests_properties(cli_train_device PROPERTIES LABELS cli TIMEOUT 120)
