# ulpcheck_add_test: a ctest that puts a plugin's kernels under ulpcheck.
#
#   ulpcheck_add_test(NAME <test> PLUGIN <target or path>
#                     [KERNELS <variant>...]      # default: every variant ulpcheck knows, the plugin's included
#                     [CASES <n>] [TIER smoke|default|nightly] [SEED <n>]
#                     [TIMEOUT <seconds>]         # default 1800: a hung kernel fails the test, not the CI job
#                     [GPU]                       # CUDA variants: skipped, saying why, where no GPU is usable
#                     [LABELS <label>...] [ARGS <more ulpcheck run arguments>...])
#
# The test runs `ulpcheck run --plugin <plugin> --kernel <variant>... --no-save
# --no-corpus` and passes when every property passed and judged cases (exit
# code 0). Failures print the shrunk case and the `ulpcheck repro` command.
function(ulpcheck_add_test)
  cmake_parse_arguments(T "GPU" "NAME;PLUGIN;CASES;TIER;SEED;TIMEOUT" "KERNELS;LABELS;ARGS" ${ARGN})
  if(NOT T_NAME OR NOT T_PLUGIN)
    message(FATAL_ERROR "ulpcheck_add_test: NAME and PLUGIN are required")
  endif()
  if(TARGET ${T_PLUGIN})
    set(plugin "$<TARGET_FILE:${T_PLUGIN}>")
  else()
    set(plugin "${T_PLUGIN}")
  endif()
  if(NOT T_CASES)
    set(T_CASES 200)
  endif()
  if(NOT T_TIER)
    set(T_TIER smoke)
  endif()
  if(NOT T_SEED)
    set(T_SEED 1)
  endif()
  if(NOT T_TIMEOUT)
    # ulpcheck kills a kernel that hangs in its worker after --case-timeout
    # (300 s) and goes on; this bounds the test as a whole, whatever happens.
    set(T_TIMEOUT 1800)
  endif()
  set(kernels "")
  foreach(k IN LISTS T_KERNELS)
    list(APPEND kernels --kernel ${k})
  endforeach()
  add_test(NAME ${T_NAME}
           COMMAND ulpcheck::cli run --plugin ${plugin} ${kernels} --cases ${T_CASES} --tier ${T_TIER}
                   --seed ${T_SEED} --no-save --no-corpus --quiet ${T_ARGS})
  set_tests_properties(${T_NAME} PROPERTIES TIMEOUT ${T_TIMEOUT})
  if(T_GPU)
    # One GPU of its own under `ctest --resource-spec-file` (ulpcheck reads
    # CTest's allocation), so GPU tests can run side by side on a multi-GPU runner.
    set_tests_properties(${T_NAME} PROPERTIES SKIP_REGULAR_EXPRESSION "needs a GPU" RESOURCE_GROUPS "gpus:1")
  endif()
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
