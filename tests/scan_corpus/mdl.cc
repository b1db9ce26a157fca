// Metadata locks on tables: shared for readers, exclusive for DDL; waiters block.
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

enum class MdlType { SHARED, EXCLUSIVE };

struct MdlLock {
    int shared = 0;
    bool exclusive = false;
};

class MdlContext {
  public:
    // Acquire a metadata lock on a table; waits while a conflicting lock is granted.
    MdlLock *AcquireLock(uint64_t table_id, MdlType type)
    {
        std::unique_lock<std::mutex> lk(mu_);
        MdlLock *lock = &locks_[table_id];
        while (Conflicts(*lock, type))
            released_.wait(lk);
        if (type == MdlType::EXCLUSIVE)
            lock->exclusive = true;
        else
            lock->shared++;
        return lock;
    }

    void ReleaseLock(MdlLock *lock, MdlType type)
    {
        std::lock_guard<std::mutex> lk(mu_);
        if (type == MdlType::EXCLUSIVE)
            lock->exclusive = false;
        else
            lock->shared--;
        released_.notify_all();
    }

  private:
    static bool Conflicts(const MdlLock &l, MdlType type)
    {
        return l.exclusive || (type == MdlType::EXCLUSIVE && l.shared > 0);
    }

    std::mutex mu_;
    std::condition_variable released_;
    std::map<uint64_t, MdlLock> locks_;
};
