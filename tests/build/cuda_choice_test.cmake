# The set-up's CUDA choice (ULPCHECK_ENABLE_CUDA, CMakeLists.txt), from a
# configure of the source tree as a user runs it:
#   cmake -DSOURCE=<tree> -DWORK=<scratch dir> -DGENERATOR=<gen> [-DPREFIX_PATH=<the build's
#         CMAKE_PREFIX_PATH>] -P cuda_choice_test.cmake
# * a value that is not AUTO, ON or OFF stops the configure, naming it;
# * AUTO builds no CUDA where no NVIDIA driver is loaded and says so, with
#   the option that builds it all the same; where a driver is loaded and nvcc
#   is found it builds CUDA.
function(configure_tree name)
  file(REMOVE_RECURSE ${WORK}/${name})
  execute_process(COMMAND ${CMAKE_COMMAND} -S ${SOURCE} -B ${WORK}/${name} -G ${GENERATOR}
                          -DULPCHECK_BUILD_TESTS=OFF "-DCMAKE_PREFIX_PATH=${PREFIX_PATH}" ${ARGN}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  set(rc ${rc} PARENT_SCOPE)
  set(log "${out}${err}" PARENT_SCOPE)
  file(REMOVE_RECURSE ${WORK}/${name})
endfunction()

configure_tree(bad_value -DULPCHECK_ENABLE_CUDA=maybe)
if(rc EQUAL 0 OR NOT log MATCHES "ULPCHECK_ENABLE_CUDA=maybe: expected AUTO, ON or OFF")
  message(FATAL_ERROR "ULPCHECK_ENABLE_CUDA=maybe: expected a failed configure naming the value, got rc=${rc}:\n${log}")
endif()

configure_tree(auto)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the default configure failed (rc=${rc}):\n${log}")
endif()
if(EXISTS /proc/driver/nvidia)
  find_program(nvcc nvcc PATHS /usr/local/cuda/bin)
  if(nvcc AND NOT log MATCHES "ulpcheck: CUDA kernels ON")
    message(FATAL_ERROR "a driver is loaded and nvcc is at ${nvcc}, but AUTO built no CUDA:\n${log}")
  endif()
else()
  if(NOT log MATCHES "no NVIDIA driver loaded here: the host backend only"
     OR NOT log MATCHES "-DULPCHECK_ENABLE_CUDA=ON compiles them" OR NOT log MATCHES "ulpcheck: CUDA kernels OFF")
    message(FATAL_ERROR "no driver is loaded here: AUTO must build no CUDA and say so:\n${log}")
  endif()
endif()
message(STATUS "the CUDA choice: a bad value refused; AUTO as expected")
